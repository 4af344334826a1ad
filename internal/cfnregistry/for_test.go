package cfnregistry

import "testing"

func TestAStatementForOneTypeGrantsNothingToAnother(t *testing.T) {
	policy := Policy{
		{Sid: "PassBindingRoles", Actions: []string{"iam:PassRole"}, Scoped: true, Conditional: true, For: []string{"AWS::RolesAnywhere::Profile"}},
		{Sid: "Buckets", Actions: []string{"s3:CreateBucket"}, Scoped: true},
	}
	tests := []struct {
		name, typ, action string
		want              bool
	}{
		{"the type it serves has it", "AWS::RolesAnywhere::Profile", "iam:PassRole", true},
		{"another type has not", "AWS::S3::Bucket", "iam:PassRole", false},
		{"a statement for no type in particular serves every type", "AWS::RolesAnywhere::Profile", "s3:CreateBucket", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.For(tt.typ).Grants(tt.action); got != tt.want {
				t.Errorf("For(%s).Grants(%s) = %v, want %v", tt.typ, tt.action, got, tt.want)
			}
		})
	}
	t.Run("so the proof reports a type's need that only another type's statement grants", func(t *testing.T) {
		r, err := Check([]Resource{{File: "t.yaml", LogicalID: "Bucket", Type: "AWS::S3::Bucket"}}, policy, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, m := range r.Missing {
			if m.Action == "iam:PassRole" {
				found = true
			}
		}
		if !found {
			t.Errorf("iam:PassRole is not reported missing for the bucket: %v", r.Missing)
		}
	})
}

func TestTheSearchDomainsUpdateIsAuthorizedAsIAMNamesIt(t *testing.T) {
	// The registry lists es:UpdateDomain, which IAM does not know (cfn-lint
	// refuses it in a policy); UpdateDomainConfig authorizes the call.
	if got := IAMAction("es:UpdateDomain"); got != "es:UpdateDomainConfig" {
		t.Errorf("IAMAction(es:UpdateDomain) = %s", got)
	}
	policy := Policy{{Sid: "SearchDomains", Scoped: true, Actions: []string{"es:CreateDomain", "es:DescribeDomain",
		"es:DescribeDomainChangeProgress", "es:UpdateDomainConfig", "es:UpgradeDomain", "es:DeleteDomain",
		"es:AddTags", "es:RemoveTags", "es:ListTags"}}}
	r, err := Check([]Resource{{File: "opensearch/instance.yaml", LogicalID: "Domain", Type: "AWS::OpenSearchService::Domain"}}, policy, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Missing) != 0 {
		t.Errorf("missing %v", r.Missing)
	}
}
