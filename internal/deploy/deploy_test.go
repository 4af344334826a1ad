package deploy

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	ok := Statement{Function: Worker, Sid: "Read", Actions: []string{"s3:GetObject"}, Resources: []string{ARN("s3", "bucket")}}
	with := func(change func(*Statement)) Statement { s := ok; change(&s); return s }
	tests := []struct {
		name    string
		drivers []Driver
		wantErr string
	}{
		{"a statement on the stack's placeholders passes", []Driver{{Name: "a", Needs: Needs{Statements: []Statement{ok}}}}, ""},
		{"an unknown placeholder is refused", []Driver{{Name: "a", Needs: Needs{Statements: []Statement{with(func(s *Statement) { s.Resources = []string{"${Bucket}"} })}}}}, "${Bucket} is no placeholder"},
		{"the service role's ARN without the service role is refused", []Driver{{Name: "a", Needs: Needs{Env: []Variable{{Function: Worker, Name: "X", Value: ServiceRoleARN}}}}}, "does not declare it needs"},
		{"a wildcard without its reason is refused", []Driver{{Name: "a", Needs: Needs{Statements: []Statement{with(func(s *Statement) { s.Resources = []string{ARN("s3", "*")} })}}}}, "WildcardReason"},
		{"a Sid two drivers give one function's statements is refused", []Driver{{Name: "a", Needs: Needs{Statements: []Statement{ok}}}, {Name: "b", Needs: Needs{Statements: []Statement{ok}}}}, "driver a has a statement"},
		{"a statement of no function is refused", []Driver{{Name: "a", Needs: Needs{Statements: []Statement{with(func(s *Statement) { s.Function = "reaper" })}}}}, `no function "reaper"`},
		{"a custom resource type passes", []Driver{{Name: "a", Needs: Needs{CustomResources: []string{CacheUserGroupMember}}}}, ""},
		{"a custom resource type that is not Custom::NAME is refused", []Driver{{Name: "a", Needs: Needs{CustomResources: []string{"AWS::S3::Bucket"}}}}, "want a type Custom::NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Manifest{Drivers: tt.drivers}.Check()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestFill(t *testing.T) {
	got := Fill(ARN("sqs", StackPrefix+"-*"), map[string]string{Partition: "aws", Region: "eu-west-1", Account: "123456789012", StackPrefix: "osb"})
	if want := "arn:aws:sqs:eu-west-1:123456789012:osb-*"; got != want {
		t.Errorf("%s, want %s", got, want)
	}
}
