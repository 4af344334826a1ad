package cfnregistry

import (
	"slices"
	"strings"
	"testing"
)

func TestMatchAction(t *testing.T) {
	tests := []struct {
		pattern, action string
		want            bool
	}{
		{"s3:CreateBucket", "s3:CreateBucket", true},
		{"s3:createbucket", "S3:CreateBucket", true},
		{"s3:*Bucket*", "s3:PutBucketTagging", true},
		{"s3:*Bucket*", "s3:TagResource", false},
		{"s3:Get*", "s3:GetObject", true},
		{"s3:Get*", "s3:PutObject", false},
		{"*", "iam:CreateUser", true},
		{"iam:?etUser", "iam:GetUser", true},
		{"iam:?etUser", "iam:GetUserPolicy", false},
		{"s3:*Tag*Resource", "s3:UntagResource", true},
		{"s3:CreateBucket", "s3:CreateBucketMetadataTableConfiguration", false},
	}
	for _, tt := range tests {
		if got := MatchAction(tt.pattern, tt.action); got != tt.want {
			t.Errorf("MatchAction(%q, %q) = %v, want %v", tt.pattern, tt.action, got, tt.want)
		}
	}
}

func TestSchemas(t *testing.T) {
	schemas, err := Schemas()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("every kept type has handlers with actions, the legacy access key's written by hand with its source", func(t *testing.T) {
		for name, s := range schemas {
			if len(s.Actions("create")) == 0 || len(s.Actions("delete")) == 0 {
				t.Errorf("%s has no create or delete actions", name)
			}
		}
		if s := schemas["AWS::IAM::AccessKey"]; s.Source == "" || !slices.Contains(s.Actions("create"), "iam:CreateAccessKey") {
			t.Errorf("AWS::IAM::AccessKey: %+v", s)
		}
	})
	t.Run("a type's properties are read, nested ones through definitions, lists and alternatives", func(t *testing.T) {
		for _, tc := range []struct {
			typ, path string
			want      bool
		}{
			{"AWS::S3::Bucket", "ReplicationConfiguration", true},
			{"AWS::S3::Bucket", "ReplicationConfiguraton", false},
			{"AWS::S3::Bucket", "LifecycleConfiguration/Rules/Status", true},
			{"AWS::S3::Bucket", "LifecycleConfiguration/Rules/Statuses", false},
			{"AWS::DynamoDB::Table", "StreamSpecification/ResourcePolicy", true},
			{"AWS::DynamoDB::Table", "ResourcePolicy/StreamSpecification", false},
			{"AWS::DynamoDB::Table", "GlobalTableSettingsReplicationMode", false},
			{"AWS::IAM::AccessKey", "UserName", true},
		} {
			if got := schemas[tc.typ].HasProperty(tc.path); got != tc.want {
				t.Errorf("%s HasProperty(%q) = %v, want %v", tc.typ, tc.path, got, tc.want)
			}
		}
	})
	t.Run("createOnlyProperties say what replaces a resource", func(t *testing.T) {
		if q := schemas["AWS::SQS::Queue"]; !q.ReplacedBy("FifoQueue") || q.ReplacedBy("VisibilityTimeout") {
			t.Errorf("AWS::SQS::Queue createOnlyProperties %v", q.CreateOnlyProperties)
		}
	})
}

func TestCheck(t *testing.T) {
	bucket := Resource{File: "b.yaml", LogicalID: "Bucket", Type: "AWS::S3::Bucket", Properties: []string{"VersioningConfiguration"}}
	everything := Policy{{Sid: "All", Actions: []string{"s3:*", "iam:PassRole", "s3tables:*"}}}
	t.Run("a policy granting every action of the type's handlers misses nothing", func(t *testing.T) {
		r, err := Check([]Resource{bucket}, everything, nil, nil)
		if err != nil || r.Problems() || len(r.Unknown) > 0 {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("a missing action is named with its type and handler; the list handler is not a stack's", func(t *testing.T) {
		p := Policy{{Actions: []string{"s3:*"}}, {Deny: true, Actions: []string{"s3:TagResource"}}}
		r, _ := Check([]Resource{bucket}, p, nil, nil)
		var got []string
		for _, m := range r.Missing {
			got = append(got, m.Handler+" "+m.Action)
		}
		for _, want := range []string{"create s3:TagResource", "update s3:TagResource", "create iam:PassRole"} {
			if !slices.Contains(got, want) {
				t.Errorf("missing %v, want it to hold %q", got, want)
			}
		}
		if slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "list ") }) {
			t.Errorf("missing %v holds a list handler's action", got)
		}
	})
	t.Run("an unused entry excuses its action until a template sets its property", func(t *testing.T) {
		p := Policy{{Actions: []string{"s3:*", "s3tables:*"}}}
		unused := []Unused{{Type: "AWS::S3::Bucket", Property: "ReplicationConfiguration", Action: "iam:PassRole", Why: "replication"}}
		if r, _ := Check([]Resource{bucket}, p, unused, nil); r.Problems() {
			t.Fatalf("%+v", r)
		}
		replicated := bucket
		replicated.Properties = []string{"ReplicationConfiguration"}
		r, _ := Check([]Resource{replicated}, p, unused, nil)
		if len(r.SetUnused) != 1 || len(r.Missing) != 2 || r.Missing[0].Action != "iam:PassRole" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("an unused entry naming no property of its type is reported, a nested one that exists is not", func(t *testing.T) {
		p := Policy{{Actions: []string{"s3:*", "s3tables:*"}}}
		unused := []Unused{
			{Type: "AWS::S3::Bucket", Property: "ReplicationConfiguraton", Action: "iam:PassRole", Why: "misspelt"},
			{Type: "AWS::S3::Bucket", Property: "ReplicationConfiguration/Role", Action: "iam:PassRole", Why: "replication"},
			{Type: "AWS::DynamoDB::Table", Property: "GlobalTableSettingsReplicationMode", Action: "dynamodb:Scan", Why: "gone"},
		}
		r, err := Check([]Resource{bucket}, p, unused, nil)
		if err != nil || !r.Problems() || len(r.NoSuchProperty) != 2 ||
			r.NoSuchProperty[0].Property != "ReplicationConfiguraton" || r.NoSuchProperty[1].Property != "GlobalTableSettingsReplicationMode" {
			t.Fatalf("%+v %v", r.NoSuchProperty, err)
		}
		if len(r.Missing) != 0 {
			t.Errorf("missing %v: the nested entry excuses iam:PassRole", r.Missing)
		}
		replicated := bucket
		replicated.Properties = []string{"ReplicationConfiguration", "ReplicationConfiguration/Role"}
		if r, _ := Check([]Resource{replicated}, p, unused[1:2], nil); len(r.SetUnused) != 1 {
			t.Errorf("a template setting the nested property: %+v", r)
		}
	})
	t.Run("a refused action is not missing, but a policy granting it is reported", func(t *testing.T) {
		user := Resource{File: "u.yaml", LogicalID: "U", Type: "AWS::IAM::User"}
		refused := []Refused{{Action: "iam:DeleteUserPermissionsBoundary", Why: "keep it"}}
		r, _ := Check([]Resource{user}, Policy{{Actions: []string{"iam:*"}}}, nil, refused)
		if len(r.Missing) != 0 || len(r.GrantedRefused) != 1 {
			t.Fatalf("%+v", r)
		}
		p := Policy{{Actions: []string{"iam:*"}}, {Deny: true, Actions: []string{"iam:DeleteUserPermissionsBoundary"}}}
		if r, _ := Check([]Resource{user}, p, nil, refused); r.Problems() {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("a Deny on named resources (the broker's own keys) refuses the action there alone", func(t *testing.T) {
		p := Policy{{Actions: []string{"kms:CreateGrant"}, Conditional: true}, {Deny: true, Actions: []string{"kms:*"}, Scoped: true}}
		if !p.Grants("kms:CreateGrant") {
			t.Error("a scoped Deny refuses the action everywhere")
		}
		p[1].Scoped = false
		if p.Grants("kms:CreateGrant") {
			t.Error("a Deny on every resource does not refuse the action")
		}
	})
	t.Run("a type with no kept schema is unknown", func(t *testing.T) {
		r, _ := Check([]Resource{{LogicalID: "C", Type: "AWS::ElastiCache::CacheCluster"}}, everything, nil, nil)
		if len(r.Unknown) != 1 {
			t.Fatalf("%+v", r)
		}
	})
}

func TestS3DeletesOfConfigurationsAreAuthorizedAsTheirPuts(t *testing.T) {
	bucket := Resource{File: "b.yaml", LogicalID: "Bucket", Type: "AWS::S3::Bucket", Properties: []string{"BucketEncryption"}}
	r, _ := Check([]Resource{bucket}, Policy{{Actions: []string{"s3:*", "iam:PassRole", "s3tables:*"}}}, nil, nil)
	if r.Problems() {
		t.Fatalf("%+v", r)
	}
	r, _ = Check([]Resource{bucket}, Policy{{Actions: []string{"s3:*", "iam:PassRole", "s3tables:*"}},
		{Deny: true, Actions: []string{"s3:PutEncryptionConfiguration"}}}, nil, nil)
	if !slices.ContainsFunc(r.Missing, func(m Missing) bool { return m.Handler == "update" && m.Action == "s3:PutEncryptionConfiguration" }) {
		t.Errorf("missing %v, want the update handler's s3:PutEncryptionConfiguration (DeleteBucketEncryption)", r.Missing)
	}
}

func TestExcess(t *testing.T) {
	types := []string{"AWS::SQS::Queue"}
	queues := Policy{
		{Sid: "Queues", Actions: []string{"sqs:CreateQueue", "sqs:deletequeue", "sqs:GetQueueAttributes"}},
		{Sid: "Refuse", Deny: true, Actions: []string{"sqs:*"}},
	}
	t.Run("what a handler of the types lists is not excess, whatever its case; a Deny grants nothing", func(t *testing.T) {
		if excess, err := Excess(queues, types, nil); err != nil || len(excess) != 0 {
			t.Errorf("excess %v %v", excess, err)
		}
	})
	t.Run("an action no handler lists, or a pattern, is excess unless listed with its reason", func(t *testing.T) {
		p := append(slices.Clone(queues), Statement{Sid: "More", Actions: []string{"sqs:PurgeQueue", "sqs:Send*", "s3:CreateBucket"}})
		excess, err := Excess(p, types, []Extra{{Action: "sqs:send*", Why: "a test"}})
		if err != nil || !slices.Equal(excess, []string{"sqs:PurgeQueue", "s3:CreateBucket"}) {
			t.Errorf("excess %v %v, want sqs:PurgeQueue and s3:CreateBucket (no handler of AWS::SQS::Queue lists it)", excess, err)
		}
	})
	t.Run("a type with no kept schema is an error", func(t *testing.T) {
		if _, err := Excess(queues, []string{"AWS::ElastiCache::CacheCluster"}, nil); err == nil {
			t.Error("no error")
		}
	})
}

func TestUpdateOf(t *testing.T) {
	schemas, err := Schemas()
	if err != nil {
		t.Fatal(err)
	}
	nested := Schema{CreateOnlyProperties: []string{"/properties/Storage/Engine"}, Immutable: []string{"Name"}, Conditional: []string{"Size"}}
	for _, tc := range []struct {
		name   string
		schema Schema
		path   string
		want   Update
	}{
		{"a create-only property of the registry replaces", schemas["AWS::S3::Bucket"], "BucketName", UpdateReplaces},
		{"an immutable property of the resource specification that the registry leaves out replaces", schemas["AWS::DynamoDB::Table"], "KeySchema", UpdateReplaces},
		{"a property the User Guide says may replace may replace", schemas["AWS::RDS::DBInstance"], "PerformanceInsightsKMSKeyId", UpdateMayReplace},
		// The resource specification marks it Conditional; the User Guide
		// says "Some interruptions": a major version upgrade in place.
		{"a database's engine version updates in place", schemas["AWS::RDS::DBInstance"], "EngineVersion", UpdateInPlace},
		{"a database's backup retention updates in place", schemas["AWS::RDS::DBInstance"], "BackupRetentionPeriod", UpdateInPlace},
		{"a mutable property updates in place", schemas["AWS::DynamoDB::Table"], "TimeToLiveSpecification", UpdateInPlace},
		{"a nested create-only property replaces", nested, "Storage/Engine", UpdateReplaces},
		{"its parent's other properties do not", nested, "Storage/Size", UpdateInPlace},
		{"below an immutable property, everything replaces", nested, "Name/First", UpdateReplaces},
		{"below a conditional property, everything may replace", nested, "Size/Unit", UpdateMayReplace},
	} {
		if got := tc.schema.UpdateOf(tc.path); got != tc.want {
			t.Errorf("%s: UpdateOf(%q) = %v, want %v", tc.name, tc.path, got, tc.want)
		}
	}
	if got := nested.ReplacingPaths(); !slices.Equal(got, []string{"Name", "Size", "Storage/Engine"}) {
		t.Errorf("ReplacingPaths() = %v", got)
	}
	if s := schemas["AWS::SQS::Queue"]; !slices.Equal(s.Immutable, []string{"FifoQueue", "QueueName"}) {
		t.Errorf("update-behaviour.json is not read onto AWS::SQS::Queue: %+v", s.Immutable)
	}
}

// A custom resource has no registry schema; CustomResource says what
// CloudFormation needs of the stack's role for any: to invoke its function.
func TestACustomResourceNeedsItsFunctionInvoked(t *testing.T) {
	s, err := Schemas()
	if err != nil {
		t.Fatal(err)
	}
	member, ok := schemaOf(s, "Custom::CacheUserGroupMember")
	if !ok || member.Source == "" {
		t.Fatalf("no entry, or one without its source, for Custom::CacheUserGroupMember: %+v", member)
	}
	for _, h := range []string{"create", "update", "delete"} {
		if got := member.Actions(h); !slices.Equal(got, []string{"lambda:InvokeFunction"}) {
			t.Errorf("%s handler: %v, want lambda:InvokeFunction", h, got)
		}
	}
	r, err := Check([]Resource{{LogicalID: "Membership", Type: "Custom::CacheUserGroupMember"}}, Policy{}, nil, nil)
	if err != nil || len(r.Unknown) != 0 || len(r.Missing) != 3 {
		t.Errorf("a policy granting nothing: %+v %v, want lambda:InvokeFunction missing for each handler", r, err)
	}
}

// TestACustomDatabaseUserNeedsItsFunctionInvoked: a Custom:: type is known
// (not Unknown), and what its stack's role needs is lambda:InvokeFunction,
// on create, update and delete.
func TestACustomDatabaseUserNeedsItsFunctionInvoked(t *testing.T) {
	user := Resource{File: "binding-user.yaml", LogicalID: "DatabaseUser", Type: "Custom::DatabaseUser", Properties: []string{"ServiceToken"}}
	r, err := Check([]Resource{user}, Policy{{Sid: "Other", Actions: []string{"secretsmanager:*"}, Scoped: true}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, m := range r.Missing {
		missing = append(missing, m.Handler+" "+m.Action)
	}
	if len(r.Unknown) > 0 || !slices.Equal(missing, []string{"create lambda:InvokeFunction", "update lambda:InvokeFunction", "delete lambda:InvokeFunction"}) {
		t.Errorf("unknown %v, missing %v", r.Unknown, missing)
	}
	granted := Policy{{Sid: "InvokeDatabaseUserFunctions", Actions: []string{"lambda:InvokeFunction"}, Scoped: true}}
	if r, _ := Check([]Resource{user}, granted, nil, nil); len(r.Missing)+len(r.Unknown) > 0 {
		t.Errorf("with the grant: %+v", r)
	}
	if excess, err := Excess(granted, []string{"Custom::DatabaseUser"}, nil); err != nil || len(excess) > 0 {
		t.Errorf("excess %v %v", excess, err)
	}
}
