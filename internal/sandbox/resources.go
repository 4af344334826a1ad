package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// clients are moto's, with credentials that may do anything: the sandbox
// makes the stack's resources before it turns IAM enforcement on.
type clients struct {
	dynamodb *dynamodb.Client
	iam      *iam.Client
	kms      *kms.Client
	s3       *s3.Client
	secrets  *secretsmanager.Client
	sfn      *sfn.Client
}

func newClients(cfg aws.Config) clients {
	return clients{dynamodb: dynamodb.NewFromConfig(cfg), iam: iam.NewFromConfig(cfg), kms: kms.NewFromConfig(cfg),
		s3:      s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }),
		secrets: secretsmanager.NewFromConfig(cfg), sfn: sfn.NewFromConfig(cfg)}
}

// made is what making a resource gives the template: its Ref and
// attributes.
type made struct {
	ref   string
	attrs map[string]string
}

// maker makes one type of resource from its resolved properties.
type maker func(ctx context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error)

// makers are the resource types the sandbox makes on moto. Lambda
// functions run under the emulator, schedules in the sandbox, the HTTP API
// is the sandbox's front; any other type is stood in for (standIn) and
// named in the start-up report.
var makers = map[string]maker{
	"AWS::KMS::Key":                    makeKey,
	"AWS::KMS::Alias":                  makeAlias,
	"AWS::DynamoDB::Table":             makeTable,
	"AWS::SecretsManager::Secret":      makeSecret,
	"AWS::IAM::Role":                   makeRole,
	"AWS::IAM::Policy":                 makePolicy,
	"AWS::IAM::ManagedPolicy":          makeManagedPolicy,
	"AWS::StepFunctions::StateMachine": makeStateMachine,
	"AWS::Lambda::Function":            makeFunction,
	"AWS::Logs::LogGroup":              makeLogGroup,
	"AWS::S3::Bucket":                  makeBucket,
	"AWS::Scheduler::Schedule":         makeSchedule,
	"AWS::ApiGatewayV2::Api":           makeHTTPAPI,
	"AWS::ApiGatewayV2::Route":         makeRoute,
	"AWS::ApiGatewayV2::Stage":         makeStage,
	"AWS::ApiGatewayV2::Integration":   makeIntegration,
}

// standIn is the Ref and Arn of a resource the sandbox does not make.
func standIn(sb *Sandbox, logicalID, typ string) made {
	service := strings.ToLower(strings.TrimPrefix(strings.SplitN(typ, "::", 3)[1], "AWS::"))
	id := sb.physicalName(logicalID, 64, false)
	return made{ref: id, attrs: map[string]string{
		"Arn": fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, sb.region, sb.account, id),
	}}
}

// physicalName is the name CloudFormation makes up for a resource the
// template leaves unnamed: STACK-LOGICALID-RANDOM, at most max characters.
func (sb *Sandbox) physicalName(logicalID string, max int, lower bool) string {
	if k, ok := sb.kept[logicalID]; ok && k.ref != "" {
		return k.ref // the name a run before gave it
	}
	suffix := randomString(12)
	prefix := sb.stack.name + "-" + logicalID
	if n := max - len(suffix) - 1; len(prefix) > n {
		prefix = prefix[:n]
	}
	name := prefix + "-" + suffix
	if lower {
		name = strings.ToLower(name)
	}
	return name
}

// createOwn runs a create call for a resource whose name is the
// sandbox's own (own: ownName, or a name it keeps for itself on its own
// moto). The SDK retries a call whose answer it lost (moto busy, a
// connection reset); when moto had carried out the first attempt, the
// retry finds the name taken. No one else can have taken such a name, so
// that answer is the first attempt's success, and read gives what it
// made. A name that is not the sandbox's own stays an error when taken, as
// in CloudFormation.
func createOwn[T any](own bool, create func() (T, error), read func() (T, error)) (T, error) {
	out, err := create()
	if err == nil || !own || !nameTaken(err) {
		return out, err
	}
	out, readErr := read()
	if readErr != nil {
		return out, fmt.Errorf("%w (an earlier attempt of this call made it? reading it back: %v)", err, readErr)
	}
	return out, nil
}

// resourceName is the name of the resource logicalID, of type typ: the
// one the template gives, or else one made up as CloudFormation makes one
// (physicalName, at most max characters); own says whether its create may
// take the name as its own when it finds it taken (ownName).
func (sb *Sandbox) resourceName(typ, given, logicalID string, max int, lower bool) (name string, own bool) {
	if given == "" {
		name = sb.physicalName(logicalID, max, lower)
		return name, sb.ownName(typ, name, true)
	}
	return given, sb.ownName(typ, given, false)
}

// ownName says whether a create of a resource of type typ named name may
// take a resource of that name that it finds as its own first attempt
// (createOwn), and records the name as this sandbox's. A name the sandbox
// made up is its own. So is one the template gives when the sandbox runs
// on a moto of its own (not one a run before kept): only the sandbox makes
// resources there, so the name can be taken only by its own earlier
// attempt, unless this sandbox already made another resource of that type
// and name, for a template that names two alike, which CloudFormation
// refuses and so does the sandbox.
func (sb *Sandbox) ownName(typ, name string, madeUp bool) bool {
	key := typ + "\x00" + name
	if sb.names == nil {
		sb.names = map[string]bool{}
	}
	taken := sb.names[key]
	sb.names[key] = true
	return madeUp || (!sb.Kept && !taken)
}

// nameTaken says that a create call failed because a resource of its
// name exists.
func nameTaken(err error) bool {
	var role *iamtypes.EntityAlreadyExistsException
	var table *dbtypes.ResourceInUseException
	var secret *smtypes.ResourceExistsException
	var machine *sfntypes.StateMachineAlreadyExists
	var bucket *s3types.BucketAlreadyOwnedByYou
	var stack *cfntypes.AlreadyExistsException
	var alias *kmstypes.AlreadyExistsException
	return errors.As(err, &role) || errors.As(err, &table) || errors.As(err, &secret) ||
		errors.As(err, &machine) || errors.As(err, &bucket) || errors.As(err, &stack) || errors.As(err, &alias)
}

// createStackOwn makes a stack the sandbox names itself on its own moto
// (createOwn).
func createStackOwn(ctx context.Context, client *cloudformation.Client, in *cloudformation.CreateStackInput, opts ...func(*cloudformation.Options)) (*cloudformation.CreateStackOutput, error) {
	return createOwn(true, func() (*cloudformation.CreateStackOutput, error) { return client.CreateStack(ctx, in, opts...) },
		func() (*cloudformation.CreateStackOutput, error) {
			out, err := client.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: in.StackName})
			if err != nil {
				return nil, err
			}
			if len(out.Stacks) != 1 {
				return nil, fmt.Errorf("stack %s: DescribeStacks answered %d stacks", aws.ToString(in.StackName), len(out.Stacks))
			}
			return &cloudformation.CreateStackOutput{StackId: out.Stacks[0].StackId}, nil
		})
}

func randomString(n int) string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(letters))))
		b[i] = letters[k.Int64()]
	}
	return string(b)
}

// str returns a string property, or "".
func str(props map[string]any, key string) string {
	if v, ok := props[key]; ok {
		return fmt.Sprint(v)
	}
	return ""
}

// decode turns a resolved property into an SDK type by its JSON: the CFN
// properties of these types are spelled as their API's fields.
func decode(v any, into any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

// document is a policy property as IAM takes it: JSON text.
func document(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	data, err := json.Marshal(v)
	return string(data), err
}

func makeKey(ctx context.Context, sb *Sandbox, _ string, props map[string]any) (made, error) {
	in := &kms.CreateKeyInput{Description: aws.String(str(props, "Description"))}
	if p, ok := props["KeyPolicy"]; ok {
		doc, err := document(p)
		if err != nil {
			return made{}, err
		}
		in.Policy = &doc
	}
	out, err := sb.clients.kms.CreateKey(ctx, in)
	if err != nil {
		return made{}, err
	}
	return made{ref: *out.KeyMetadata.KeyId, attrs: map[string]string{"Arn": *out.KeyMetadata.Arn, "KeyId": *out.KeyMetadata.KeyId}}, nil
}

func makeAlias(ctx context.Context, sb *Sandbox, _ string, props map[string]any) (made, error) {
	name := str(props, "AliasName")
	_, err := createOwn(sb.ownName("AWS::KMS::Alias", name, false), func() (*kms.CreateAliasOutput, error) {
		return sb.clients.kms.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: &name, TargetKeyId: aws.String(str(props, "TargetKeyId"))})
	}, func() (*kms.CreateAliasOutput, error) {
		_, err := sb.clients.kms.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: &name})
		return nil, err
	})
	return made{ref: name}, err
}

func makeTable(ctx context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	name, own := sb.resourceName("AWS::DynamoDB::Table", str(props, "TableName"), logicalID, 255, false)
	in := &dynamodb.CreateTableInput{TableName: &name, BillingMode: dbtypes.BillingMode(str(props, "BillingMode"))}
	for key, into := range map[string]any{
		"AttributeDefinitions": &in.AttributeDefinitions, "KeySchema": &in.KeySchema,
		"GlobalSecondaryIndexes": &in.GlobalSecondaryIndexes, "LocalSecondaryIndexes": &in.LocalSecondaryIndexes,
		"ProvisionedThroughput": &in.ProvisionedThroughput, "StreamSpecification": &in.StreamSpecification,
	} {
		if v, ok := props[key]; ok {
			if err := decode(v, into); err != nil {
				return made{}, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	if v, ok := props["SSESpecification"].(map[string]any); ok {
		in.SSESpecification = &dbtypes.SSESpecification{Enabled: aws.Bool(v["SSEEnabled"] == true),
			SSEType: dbtypes.SSEType(str(v, "SSEType")), KMSMasterKeyId: aws.String(str(v, "KMSMasterKeyId"))}
	}
	table, err := createOwn(own, func() (*dbtypes.TableDescription, error) {
		out, err := sb.clients.dynamodb.CreateTable(ctx, in)
		if err != nil {
			return nil, err
		}
		return out.TableDescription, nil
	}, func() (*dbtypes.TableDescription, error) {
		out, err := sb.clients.dynamodb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
		if err != nil {
			return nil, err
		}
		return out.Table, nil
	})
	if err != nil {
		return made{}, err
	}
	if v, ok := props["TimeToLiveSpecification"].(map[string]any); ok && v["Enabled"] == true {
		if _, err := sb.clients.dynamodb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &name,
			TimeToLiveSpecification: &dbtypes.TimeToLiveSpecification{AttributeName: aws.String(str(v, "AttributeName")), Enabled: aws.Bool(true)}}); err != nil {
			return made{}, fmt.Errorf("TimeToLiveSpecification: %w", err)
		}
	}
	attrs := map[string]string{"Arn": *table.TableArn}
	if table.LatestStreamArn != nil {
		attrs["StreamArn"] = *table.LatestStreamArn
	}
	return made{ref: name, attrs: attrs}, nil
}

func makeSecret(ctx context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	name, own := sb.resourceName("AWS::SecretsManager::Secret", str(props, "Name"), logicalID, 256, false)
	value := str(props, "SecretString")
	if g, ok := props["GenerateSecretString"].(map[string]any); ok {
		in := &secretsmanager.GetRandomPasswordInput{
			ExcludeCharacters: aws.String(str(g, "ExcludeCharacters")), ExcludeLowercase: aws.Bool(g["ExcludeLowercase"] == true),
			ExcludeNumbers: aws.Bool(g["ExcludeNumbers"] == true), ExcludePunctuation: aws.Bool(g["ExcludePunctuation"] == true),
			ExcludeUppercase: aws.Bool(g["ExcludeUppercase"] == true), IncludeSpace: aws.Bool(g["IncludeSpace"] == true),
			RequireEachIncludedType: aws.Bool(g["RequireEachIncludedType"] != false),
		}
		if n, ok := g["PasswordLength"].(float64); ok {
			in.PasswordLength = aws.Int64(int64(n))
		}
		out, err := sb.clients.secrets.GetRandomPassword(ctx, in)
		if err != nil {
			return made{}, err
		}
		value = *out.RandomPassword
		if tmpl := str(g, "SecretStringTemplate"); tmpl != "" {
			var m map[string]any
			if err := json.Unmarshal([]byte(tmpl), &m); err != nil {
				return made{}, fmt.Errorf("SecretStringTemplate: %w", err)
			}
			m[str(g, "GenerateStringKey")] = value
			data, _ := json.Marshal(m)
			value = string(data)
		}
	}
	in := &secretsmanager.CreateSecretInput{Name: &name, SecretString: &value, Description: aws.String(str(props, "Description"))}
	if k := str(props, "KmsKeyId"); k != "" {
		in.KmsKeyId = &k
	}
	arn, err := createOwn(own, func() (string, error) {
		out, err := sb.clients.secrets.CreateSecret(ctx, in)
		if err != nil {
			return "", err
		}
		return *out.ARN, nil
	}, func() (string, error) {
		out, err := sb.clients.secrets.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: &name})
		if err != nil {
			return "", err
		}
		return *out.ARN, nil
	})
	if err != nil {
		return made{}, err
	}
	sb.secrets[arn] = value
	return made{ref: arn, attrs: map[string]string{"Id": arn}}, nil
}

func makeRole(ctx context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	name, own := sb.resourceName("AWS::IAM::Role", str(props, "RoleName"), logicalID, 64, false)
	trust, err := document(props["AssumeRolePolicyDocument"])
	if err != nil {
		return made{}, err
	}
	in := &iam.CreateRoleInput{RoleName: &name, AssumeRolePolicyDocument: &trust, Description: aws.String(str(props, "Description"))}
	if p := str(props, "Path"); p != "" {
		in.Path = &p
	}
	role, err := createOwn(own, func() (*iamtypes.Role, error) {
		out, err := sb.clients.iam.CreateRole(ctx, in)
		if err != nil {
			return nil, err
		}
		return out.Role, nil
	}, func() (*iamtypes.Role, error) {
		out, err := sb.clients.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: &name})
		if err != nil {
			return nil, err
		}
		return out.Role, nil
	})
	if err != nil {
		return made{}, err
	}
	if err := putRolePolicies(ctx, sb, name, props); err != nil {
		return made{}, err
	}
	return made{ref: name, attrs: map[string]string{"Arn": *role.Arn, "RoleId": *role.RoleId}}, nil
}

// putRolePolicies puts a role's inline policies (Policies) and attaches
// its managed ones (ManagedPolicyArns), as the template says: to a role
// made, or to one a deploy changes.
func putRolePolicies(ctx context.Context, sb *Sandbox, name string, props map[string]any) error {
	var policies []struct {
		PolicyName     string
		PolicyDocument any
	}
	if err := decode(props["Policies"], &policies); err != nil {
		return fmt.Errorf("property Policies: %w", err)
	}
	for _, p := range policies {
		doc, err := document(p.PolicyDocument)
		if err != nil {
			return err
		}
		if _, err := sb.clients.iam.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: &name, PolicyName: &p.PolicyName, PolicyDocument: &doc}); err != nil {
			return fmt.Errorf("policy %s: %w", p.PolicyName, err)
		}
		sb.policies.addInline(name, doc)
	}
	var managed []string
	if err := decode(props["ManagedPolicyArns"], &managed); err != nil {
		return fmt.Errorf("ManagedPolicyArns: %w", err)
	}
	for _, arn := range managed {
		if _, err := sb.clients.iam.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: &name, PolicyArn: &arn}); err != nil {
			return fmt.Errorf("managed policy %s: %w", arn, err)
		}
		sb.policies.attach(name, arn)
	}
	return nil
}

// roleNames are the names of the roles a policy names.
func roleNames(props map[string]any) ([]string, error) {
	var roles []string
	err := decode(props["Roles"], &roles)
	return roles, err
}

func makePolicy(ctx context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	if err := putPolicy(ctx, sb, props); err != nil {
		return made{}, err
	}
	return made{ref: sb.physicalName(logicalID, 64, false)}, nil
}

func putPolicy(ctx context.Context, sb *Sandbox, props map[string]any) error {
	doc, err := document(props["PolicyDocument"])
	if err != nil {
		return err
	}
	name := str(props, "PolicyName")
	roles, err := roleNames(props)
	if err != nil {
		return err
	}
	for _, role := range roles {
		if _, err := sb.clients.iam.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: &role, PolicyName: &name, PolicyDocument: &doc}); err != nil {
			return fmt.Errorf("role %s: %w", role, err)
		}
		sb.policies.addInline(role, doc)
	}
	return nil
}

func makeManagedPolicy(ctx context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	doc, err := document(props["PolicyDocument"])
	if err != nil {
		return made{}, err
	}
	name, own := sb.resourceName("AWS::IAM::ManagedPolicy", str(props, "ManagedPolicyName"), logicalID, 128, false)
	in := &iam.CreatePolicyInput{PolicyName: &name, PolicyDocument: &doc}
	if p := str(props, "Path"); p != "" {
		in.Path = &p
	}
	arn, err := createOwn(own, func() (string, error) {
		out, err := sb.clients.iam.CreatePolicy(ctx, in)
		if err != nil {
			return "", err
		}
		return *out.Policy.Arn, nil
	}, func() (string, error) {
		path := aws.ToString(in.Path)
		if path == "" {
			path = "/"
		}
		out, err := sb.clients.iam.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String(fmt.Sprintf("arn:aws:iam::%s:policy%s%s", sb.account, path, name))})
		if err != nil {
			return "", err
		}
		return *out.Policy.Arn, nil
	})
	if err != nil {
		return made{}, err
	}
	sb.policies.addManaged(arn, doc)
	roles, err := roleNames(props)
	if err != nil {
		return made{}, err
	}
	for _, role := range roles {
		if _, err := sb.clients.iam.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: &role, PolicyArn: &arn}); err != nil {
			return made{}, fmt.Errorf("role %s: %w", role, err)
		}
		sb.policies.attach(role, arn)
	}
	return made{ref: arn}, nil
}

func makeStateMachine(ctx context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	name, own := sb.resourceName("AWS::StepFunctions::StateMachine", str(props, "StateMachineName"), logicalID, 80, false)
	definition, err := definitionOf(props)
	if err != nil {
		return made{}, err
	}
	typ := sfntypes.StateMachineTypeStandard
	if t := str(props, "StateMachineType"); t != "" {
		typ = sfntypes.StateMachineType(t)
	}
	arn, err := createOwn(own, func() (string, error) {
		out, err := sb.clients.sfn.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{Name: &name, Definition: &definition,
			RoleArn: aws.String(str(props, "RoleArn")), Type: typ})
		if err != nil {
			return "", err
		}
		return *out.StateMachineArn, nil
	}, func() (string, error) {
		arn := fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:%s", sb.region, sb.account, name)
		out, err := sb.clients.sfn.DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: &arn})
		if err != nil {
			return "", err
		}
		return *out.StateMachineArn, nil
	})
	if err != nil {
		return made{}, err
	}
	return made{ref: arn, attrs: map[string]string{"Arn": arn, "Name": name}}, nil
}

// definitionOf is a state machine's definition, as Step Functions takes it.
func definitionOf(props map[string]any) (string, error) {
	definition := str(props, "DefinitionString")
	if d, ok := props["Definition"]; ok {
		data, err := json.Marshal(d)
		if err != nil {
			return "", err
		}
		definition = string(data)
	}
	// DefinitionSubstitutions: ${key} in the definition becomes the value,
	// as CloudFormation does.
	if subs, ok := props["DefinitionSubstitutions"].(map[string]any); ok {
		for k, v := range subs {
			definition = strings.ReplaceAll(definition, "${"+k+"}", fmt.Sprint(v))
		}
	}
	return definition, nil
}

// inMoto are the types of the resources the sandbox makes on moto: those
// a sandbox taking up a kept state (KEEP=1) or a deploy finds there. The
// others are the sandbox's own (functions, schedules, the front), made
// again by each run.
var inMoto = map[string]bool{"AWS::KMS::Key": true, "AWS::KMS::Alias": true, "AWS::DynamoDB::Table": true,
	"AWS::SecretsManager::Secret": true, "AWS::IAM::Role": true, "AWS::IAM::Policy": true,
	"AWS::IAM::ManagedPolicy": true, "AWS::StepFunctions::StateMachine": true}

// takeUp is a resource on moto that the sandbox made before (kept), as a
// deploy changes it: a role's and a policy's documents put again, a state
// machine's definition updated, the rest (keys, tables, secrets) kept as
// they are, as CloudFormation keeps a resource whose properties did not
// change.
func takeUp(ctx context.Context, sb *Sandbox, typ string, props map[string]any, kept made) (made, error) {
	switch typ {
	case "AWS::IAM::Role":
		return kept, putRolePolicies(ctx, sb, kept.ref, props)
	case "AWS::IAM::Policy":
		return kept, putPolicy(ctx, sb, props)
	case "AWS::IAM::ManagedPolicy":
		doc, err := document(props["PolicyDocument"])
		if err != nil {
			return kept, err
		}
		sb.policies.addManaged(kept.ref, doc)
		roles, err := roleNames(props)
		if err != nil {
			return kept, err
		}
		for _, role := range roles {
			sb.policies.attach(role, kept.ref)
		}
	case "AWS::StepFunctions::StateMachine":
		definition, err := definitionOf(props)
		if err != nil {
			return kept, err
		}
		if _, err := sb.clients.sfn.UpdateStateMachine(ctx, &sfn.UpdateStateMachineInput{StateMachineArn: &kept.ref, Definition: &definition}); err != nil {
			return kept, err
		}
	}
	return kept, nil
}

func makeLogGroup(_ context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	name := str(props, "LogGroupName")
	if name == "" {
		name = sb.physicalName(logicalID, 512, false)
	}
	return made{ref: name, attrs: map[string]string{"Arn": fmt.Sprintf("arn:aws:logs:%s:%s:log-group:%s:*", sb.region, sb.account, name)}}, nil
}

// makeFunction records the function, which runs under the emulator (see
// functions.go) once every resource is made.
func makeFunction(_ context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	name := str(props, "FunctionName")
	if name == "" {
		name = sb.physicalName(logicalID, 64, false)
	}
	arn := fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", sb.region, sb.account, name)
	spec := functionSpec{logicalID: logicalID, name: name, arn: arn, role: str(props, "Role"), runtime: str(props, "Runtime"),
		timeout: 3, env: map[string]string{}}
	if t, ok := props["Timeout"].(float64); ok {
		spec.timeout = int(t)
	}
	if m, ok := props["MemorySize"].(float64); ok {
		spec.memoryMB = int(m)
	}
	if n, ok := props["ReservedConcurrentExecutions"].(float64); ok {
		spec.reserved = int(n)
	}
	if e, ok := props["Environment"].(map[string]any); ok {
		vars, _ := e["Variables"].(map[string]any)
		for k, v := range vars {
			spec.env[k] = fmt.Sprint(v)
		}
	}
	sb.functionSpecs = append(sb.functionSpecs, spec)
	return made{ref: name, attrs: map[string]string{"Arn": arn}}, nil
}

// makeSchedule records a schedule, which the sandbox runs itself.
func makeSchedule(_ context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	target, _ := props["Target"].(map[string]any)
	name := str(props, "Name")
	if name == "" {
		name = sb.physicalName(logicalID, 64, false)
	}
	sb.schedules = append(sb.schedules, schedule{name: name, expression: str(props, "ScheduleExpression"),
		target: str(target, "Arn"), input: str(target, "Input"), enabled: str(props, "State") != "DISABLED"})
	return made{ref: name, attrs: map[string]string{"Arn": fmt.Sprintf("arn:aws:scheduler:%s:%s:schedule/default/%s", sb.region, sb.account, name)}}, nil
}

// makeHTTPAPI stands the sandbox's front in for the HTTP API: its endpoint
// is the front's URL.
func makeHTTPAPI(_ context.Context, sb *Sandbox, _ string, props map[string]any) (made, error) {
	if p := str(props, "ProtocolType"); p != "HTTP" {
		return made{}, fmt.Errorf("ProtocolType %s: the sandbox fronts HTTP APIs only", p)
	}
	id := strings.ToLower(randomString(10))
	return made{ref: id, attrs: map[string]string{"ApiEndpoint": sb.URL, "ApiId": id}}, nil
}

func makeIntegration(_ context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	id := strings.ToLower(randomString(7))
	sb.integrations[id] = integration{uri: str(props, "IntegrationUri"), payloadVersion: str(props, "PayloadFormatVersion")}
	return made{ref: id, attrs: map[string]string{"IntegrationId": id}}, nil
}

func makeRoute(_ context.Context, sb *Sandbox, _ string, props map[string]any) (made, error) {
	id := strings.ToLower(randomString(7))
	target := str(props, "Target") // integrations/ID
	sb.routes = append(sb.routes, route{key: str(props, "RouteKey"), integration: path.Base(target)})
	return made{ref: id, attrs: map[string]string{"RouteId": id}}, nil
}

func makeStage(_ context.Context, sb *Sandbox, _ string, props map[string]any) (made, error) {
	name := str(props, "StageName")
	if name != "$default" {
		sb.stagePrefix = "/" + url.PathEscape(name)
	}
	return made{ref: name}, nil
}

// makeBucket makes a bucket (the service templates' bucket), named as
// CloudFormation names an unnamed one, in lower case: an S3 ARN has no
// Region nor account, which a stand-in's would have, and IAM refuses such
// an ARN in a policy.
func makeBucket(ctx context.Context, sb *Sandbox, logicalID string, props map[string]any) (made, error) {
	name, own := sb.resourceName("AWS::S3::Bucket", str(props, "BucketName"), logicalID, 63, true)
	in := &s3.CreateBucketInput{Bucket: aws.String(name)}
	if sb.region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(sb.region)}
	}
	if _, err := createOwn(own, func() (*s3.CreateBucketOutput, error) { return sb.clients.s3.CreateBucket(ctx, in) },
		func() (*s3.CreateBucketOutput, error) {
			_, err := sb.clients.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &name})
			return nil, err
		}); err != nil {
		return made{}, err
	}
	return made{ref: name, attrs: map[string]string{
		"Arn":        "arn:aws:s3:::" + name,
		"DomainName": name + ".s3.amazonaws.com",
	}}, nil
}
