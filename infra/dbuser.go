package infra

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/serverless-osb/broker/infra/servicerole"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
)

// DatabaseUserVPC is a VPC the catalog's database plans name: the stack
// deploys the Custom::DatabaseUser function (functions/dbuser) there, named
// PREFIX-dbuser-<vpc id>, which those plans fix as DatabaseUserFunction.
type DatabaseUserVPC struct {
	VpcID string
	// SubnetIDs are private subnets of the VPC that reach the databases,
	// Secrets Manager and S3.
	SubnetIDs []string
	// SecurityGroupIDs are the catalog's networks' client security groups
	// in the VPC, which the function joins beside its own: the databases
	// admit their members on their port.
	SecurityGroupIDs []string
	// account and region are the VPC's, in the target stack, where
	// condition deploys its function only in them (targetNetworks); empty
	// and nil at home.
	account, region string
	condition       awscdk.CfnCondition
}

// catalogNetworks adds to vpcs (the databaseUserVpcs context's) the VPCs
// of the catalog's networks (catalog.yaml's top-level networks), where the
// catalog's database plans run their Custom::DatabaseUser function: the
// catalog is the one place that says where databases live. Two networks
// in one VPC share its function, in the first one's subnets. A network in
// another account and Region is the target stack's.
func catalogNetworks(path string, vpcs []DatabaseUserVPC) ([]DatabaseUserVPC, error) {
	if path == "" {
		return vpcs, nil
	}
	cat, err := catalog.Load(path)
	if err != nil {
		return nil, err
	}
	var home []*catalog.Network
	for _, n := range cat.Networks() {
		if !n.Placed() { // another account's is the target stack's (targetNetworks)
			home = append(home, n)
		}
	}
	return vpcsOf(home, vpcs), nil
}

// vpcsOf adds to vpcs the VPCs of networks: two networks in one VPC share
// its function, in the first one's subnets (and account and Region), a
// member of each one's client security group.
func vpcsOf(networks []*catalog.Network, vpcs []DatabaseUserVPC) []DatabaseUserVPC {
	for _, n := range networks {
		i := slices.IndexFunc(vpcs, func(v DatabaseUserVPC) bool { return v.VpcID == n.VpcID })
		if i < 0 {
			vpcs = append(vpcs, DatabaseUserVPC{VpcID: n.VpcID, SubnetIDs: n.SubnetIDs, account: n.Account, region: n.Region})
			i = len(vpcs) - 1
		}
		if g := n.ClientSecurityGroupID; g != "" && !slices.Contains(vpcs[i].SecurityGroupIDs, g) {
			vpcs[i].SecurityGroupIDs = append(vpcs[i].SecurityGroupIDs, g)
		}
	}
	return vpcs
}

// ContextDatabaseUserVPCs lists the VPCs, comma-separated (or a list in
// cdk.json), each VPC_ID=SUBNET_ID+SUBNET_ID.
const (
	ContextDatabaseUserVPCs = "databaseUserVpcs"
	// ContextDatabaseUserCode is the dbuser function's asset directory.
	ContextDatabaseUserCode = "databaseUserCode"
)

// DefaultDatabaseUserCodeDir is where make build puts the dbuser bundle.
const DefaultDatabaseUserCodeDir = "dist/dbuser"

var (
	vpcID    = regexp.MustCompile(`^vpc-[0-9a-f]{8,17}$`)
	subnetID = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
)

// parseDatabaseUserVPCs reads VPC_ID=SUBNET_ID+SUBNET_ID items.
func parseDatabaseUserVPCs(items []string) ([]DatabaseUserVPC, error) {
	var vpcs []DatabaseUserVPC
	seen := map[string]bool{}
	for _, item := range items {
		vpc, subnets, ok := strings.Cut(item, "=")
		if !ok || !vpcID.MatchString(vpc) {
			return nil, fmt.Errorf("%s: %q: want VPC_ID=SUBNET_ID+SUBNET_ID (vpc-0123456789abcdef0=subnet-…+subnet-…)", ContextDatabaseUserVPCs, item)
		}
		if seen[vpc] {
			return nil, fmt.Errorf("%s: %s is named twice", ContextDatabaseUserVPCs, vpc)
		}
		seen[vpc] = true
		v := DatabaseUserVPC{VpcID: vpc, SubnetIDs: strings.Split(subnets, "+")}
		for _, s := range v.SubnetIDs {
			if !subnetID.MatchString(s) {
				return nil, fmt.Errorf("%s: %q: %q is not a subnet id", ContextDatabaseUserVPCs, item, s)
			}
		}
		vpcs = append(vpcs, v)
	}
	return vpcs, nil
}

// reasonENIs is why the dbuser role's network interface statement names "*".
const reasonENIs = "A function in a VPC makes and deletes its network interfaces through Lambda, which needs " +
	"ec2:CreateNetworkInterface, DescribeNetworkInterfaces, DeleteNetworkInterface, AssignPrivateIpAddresses and " +
	"UnassignPrivateIpAddresses; DescribeNetworkInterfaces supports no resource-level permission, and the interfaces' " +
	"ids are made at run time (the managed AWSLambdaVPCAccessExecutionRole grants the same on \"*\")."

// reasonBindingSecrets is why the dbuser role reads and writes PREFIX-*.
const reasonBindingSecrets = "The binding stacks' secrets, named after the binding stack (PREFIX-…-db-user), made " +
	"at run time: the function reads the password the stack generated and writes the user's name beside it."

// reasonMasterSecrets is why the dbuser role reads rds!db-*.
const reasonMasterSecrets = "RDS names the master secrets it manages rds!db-<uuid>; the condition on the tag RDS " +
	"gives each (its database's ARN) keeps them to this deployment's databases (PREFIX-…)."

// reasonClusterMasterSecrets is why the dbuser role reads rds!cluster-*.
const reasonClusterMasterSecrets = "RDS names the master secrets it manages for Aurora clusters rds!cluster-<uuid>; the " +
	"condition on the tag RDS gives each (its cluster's ARN) keeps them to this deployment's clusters (PREFIX-…)."

// databaseUsers deploys the Custom::DatabaseUser function in each VPC the
// props name, with one role: the master secrets of this deployment's
// databases (by RDS's tag), the binding secrets (PREFIX-*), its network
// interfaces, its log group. Nothing when no VPC is named.
func (b *builder) databaseUsers() {
	b.databaseUsersOn(nil)
}

// databaseUsersOn is databaseUsers with the shared role and log group on
// the condition anyVPC (nil: none), and each VPC's resources on its own.
func (b *builder) databaseUsersOn(anyVPC awscdk.CfnCondition) {
	if len(b.props.DatabaseUserVPCs) == 0 {
		return
	}
	role := b.lambdaRole("DatabaseUserRole", "The broker's Custom::DatabaseUser functions: binding users of its databases.")
	logs := b.logGroup("DatabaseUserLogs", nil)
	prefix := b.props.StackPrefix
	master := servicerole.ARN{Service: "secretsmanager", Resource: "secret:rds!db-*"}
	clusterMaster := servicerole.ARN{Service: "secretsmanager", Resource: "secret:rds!cluster-*"}
	bindings := servicerole.ARN{Service: "secretsmanager", Resource: "secret:" + prefix + "-*"}
	role.AddToPrincipalPolicy(logsStatement(logs.LogGroupArn()))
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("ReadTheMasterSecrets"), Actions: jsii.Strings("secretsmanager:GetSecretValue"),
		Resources: &[]*string{token(b.stack, master)},
		Conditions: &map[string]any{"StringLike": map[string]any{
			servicerole.DatabaseSecretTag: token(b.stack, servicerole.DatabasesARN(prefix)),
		}},
	}))
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("ReadTheClusterMasterSecrets"), Actions: jsii.Strings("secretsmanager:GetSecretValue"),
		Resources: &[]*string{token(b.stack, clusterMaster)},
		Conditions: &map[string]any{"StringLike": map[string]any{
			servicerole.ClusterSecretTag: token(b.stack, servicerole.ClustersARN(prefix)),
		}},
	}))
	role.AddToPrincipalPolicy(statement("ReadAndWriteTheBindingSecrets",
		[]string{"secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"}, token(b.stack, bindings)))
	role.AddToPrincipalPolicy(statement("NetworkInterfaces", []string{"ec2:CreateNetworkInterface",
		"ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses",
		"ec2:UnassignPrivateIpAddresses"}, jsii.String("*")))
	suppress(role,
		rule("AwsSolutions-IAM5", reasonXRay+" "+reasonENIs, "Resource::*"),
		rule("AwsSolutions-IAM5", reasonMasterSecrets, master.Nag()),
		rule("AwsSolutions-IAM5", reasonClusterMasterSecrets, clusterMaster.Nag()),
		rule("AwsSolutions-IAM5", reasonBindingSecrets, bindings.Nag()))
	onCondition(anyVPC, role, logs)

	for _, v := range b.props.DatabaseUserVPCs {
		id := "DatabaseUser" + strings.TrimPrefix(v.VpcID, "vpc-")
		// Out to the databases and to HTTPS (Secrets Manager, S3 for
		// CloudFormation's answer); nothing in.
		egress := []any{}
		for _, port := range []float64{443, 5432, 3306} {
			egress = append(egress, &awsec2.CfnSecurityGroup_EgressProperty{IpProtocol: jsii.String("tcp"),
				FromPort: jsii.Number(port), ToPort: jsii.Number(port), CidrIp: jsii.String("0.0.0.0/0"),
				Description: jsii.String(fmt.Sprintf("tcp %v", port))})
		}
		group := awsec2.NewCfnSecurityGroup(b.stack, jsii.String(id+"SecurityGroup"), &awsec2.CfnSecurityGroupProps{
			// No apostrophe: EC2 refuses one in a description.
			GroupDescription: jsii.String("The serverless-osb Custom::DatabaseUser function in " + v.VpcID +
				": the security groups of its databases admit this one on their port."),
			VpcId:               jsii.String(v.VpcID),
			SecurityGroupEgress: &egress,
		})
		fn := b.function(id+"Function", functionSpec{
			description: "Custom::DatabaseUser in " + v.VpcID + ": makes and drops the database users of bindings.",
			codeDir:     b.props.DatabaseUserCodeDir,
			memoryMB:    DefaultMemoryMB,
			timeout:     60 * time.Second,
			role:        role,
			logs:        logs,
			env:         map[string]*string{},
		})
		groups := append([]*string{group.AttrGroupId()}, *jsii.Strings(v.SecurityGroupIDs...)...)
		cfn := fn.Node().DefaultChild().(awslambda.CfnFunction)
		cfn.SetFunctionName(jsii.String(deploy.DatabaseUserFunctionName(prefix, v.VpcID)))
		cfn.SetVpcConfig(&awslambda.CfnFunction_VpcConfigProperty{
			SubnetIds:        jsii.Strings(v.SubnetIDs...),
			SecurityGroupIds: &groups,
		})
		out := awscdk.NewCfnOutput(b.stack, jsii.String(id+"SecurityGroupId"), &awscdk.CfnOutputProps{
			Description: jsii.String("The security group of the Custom::DatabaseUser function in " + v.VpcID +
				": give it to the database plans of that VPC (their instances admit it)."),
			Value: group.AttrGroupId(),
		})
		if v.condition != nil {
			onCondition(v.condition, group, fn)
			out.SetCondition(v.condition)
		}
	}
}

// checkDatabaseUserAsset makes sure the dbuser bundle is built when a VPC
// needs it.
func checkDatabaseUserAsset(p BrokerStackProps) error {
	if len(p.DatabaseUserVPCs) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(p.DatabaseUserCodeDir, "bootstrap")); err != nil {
		return fmt.Errorf("the Custom::DatabaseUser function's asset: %w (make build writes it)", err)
	}
	return nil
}
