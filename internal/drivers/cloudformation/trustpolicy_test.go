package cloudformation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The role binding's trust policy, evaluated against certificates as
// Cloud Foundry's Diego makes them and as IAM Roles Anywhere maps them to
// principal tags (docs/app-identity.md).

// roleTemplates are the example services' role binding templates: each
// trusts the same way, whatever it grants.
func roleTemplates(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "..", "services", "*", "binding-role.yaml"))
	if err != nil || len(paths) < 3 {
		t.Fatalf("role binding templates %v (%v), want S3's, SQS's and DynamoDB's at least", paths, err)
	}
	return paths
}

const (
	boundApp    = "3a6f2c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
	otherApp    = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
	theSpace    = "c0ffee00-1111-4222-8333-444455556666"
	theOrg      = "0dd5ca1e-7777-4888-9999-aaaabbbbcccc"
	anInstance  = "6e1d5c4b-3a29-4817-a6f5-e4d3c2b1a098"
	trustAnchor = "arn:aws:rolesanywhere:eu-west-1:123456789012:trust-anchor/4e3d2c1b-a098-4765-b432-10fedcba9876"
	otherAnchor = "arn:aws:rolesanywhere:eu-west-1:123456789012:trust-anchor/00000000-1111-4222-8333-444444444444"
)

// instanceIdentity is a certificate as Diego's executor makes one
// (depot/containerstore/credmanager.go, createCertificateTemplate): the
// instance's GUID as common name and DNS name, and the organizational
// units it is given, through Go's crypto/x509, which writes them as one
// multi-valued RDN.
func instanceIdentity(t *testing.T, cn string, units ...string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "instanceIdentityCA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject:   pkix.Name{CommonName: cn, OrganizationalUnit: units},
		DNSNames:  []string{cn},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageKeyAgreement,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// mapping is one way IAM Roles Anywhere could turn an attribute that the
// subject holds several values of into its one principal tag: AWS
// documents that each RDN of the subject becomes a tag x509Subject/<type>
// and that a tag is one string, but not which value, or values, a
// multi-valued RDN gives.
type mapping struct {
	name string
	tag  func(values []string) string
}

var mappings = []mapping{
	{"the first value, as encoded", func(v []string) string { return v[0] }},
	{"every value, joined with + as RFC 4514 writes a multi-valued RDN", func(v []string) string { return strings.Join(v, "+") }},
	{"the last value, as encoded", func(v []string) string { return v[len(v)-1] }},
}

var attributeNames = map[string]string{"2.5.4.3": "CN", "2.5.4.11": "OU", "2.5.4.10": "O", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST"}

// principalTags are the session's principal tags for cert under the
// profile's attribute mapping (x509Subject: CN and OU), m deciding the
// tag of an attribute with several values.
func principalTags(t *testing.T, cert *x509.Certificate, m mapping) map[string]string {
	t.Helper()
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) > 0 {
		t.Fatalf("subject: %v", err)
	}
	values := map[string][]string{}
	for _, rdn := range rdns {
		for _, atv := range rdn {
			name := attributeNames[atv.Type.String()]
			if name == "CN" || name == "OU" {
				values[name] = append(values[name], fmt.Sprint(atv.Value))
			}
		}
	}
	tags := map[string]string{}
	for name, v := range values {
		tags["aws:PrincipalTag/x509Subject/"+name] = m.tag(v)
	}
	return tags
}

// statement is one statement of a policy, as evaluated here.
type statement struct {
	Effect    string
	Principal map[string]any
	Action    []string
	Condition map[string]map[string][]string
}

// trustPolicy is the Role's AssumeRolePolicyDocument for a binding of app
// under anchor.
func trustPolicy(t *testing.T, template, app, anchor string) []statement {
	t.Helper()
	doc := readTemplateNode(t, template)
	node := nodeAt(doc, "Resources", "Role", "Properties", "AssumeRolePolicyDocument")
	if node == nil {
		t.Fatal("the role has no trust policy")
	}
	v, err := templateValues{Parameters: map[string]string{AppGUIDParameter: app, TrustAnchorParameter: anchor}}.eval(node)
	if err != nil {
		t.Fatal(err)
	}
	var out []statement
	for _, raw := range v.(map[string]any)["Statement"].([]any) {
		s := raw.(map[string]any)
		st := statement{Effect: s["Effect"].(string), Principal: s["Principal"].(map[string]any), Action: strings1(s["Action"]),
			Condition: map[string]map[string][]string{}}
		conditions, _ := s["Condition"].(map[string]any)
		for op, byKey := range conditions {
			st.Condition[op] = map[string][]string{}
			for key, values := range byKey.(map[string]any) {
				st.Condition[op][key] = strings1(values)
			}
		}
		out = append(out, st)
	}
	return out
}

func strings1(v any) []string {
	if s, ok := v.(string); ok {
		return []string{s}
	}
	var out []string
	for _, e := range v.([]any) {
		out = append(out, e.(string))
	}
	return out
}

// allows evaluates a trust policy as IAM does for an AssumeRole by service
// with the request context keys: some Allow statement names the
// principal and the action, and every condition of it holds. No Deny is
// written in these trust policies; one fails the test.
func allows(t *testing.T, policy []statement, service, action string, keys map[string]string) bool {
	t.Helper()
	allowed := false
	for _, s := range policy {
		if s.Effect != "Allow" {
			t.Fatalf("statement effect %s: the evaluator knows Allow only", s.Effect)
		}
		if !slices.Contains(strings1(s.Principal["Service"]), service) || !slices.Contains(s.Action, action) {
			continue
		}
		holds := true
		for op, byKey := range s.Condition {
			for key, values := range byKey {
				if !condition(t, op, keys, key, values) {
					holds = false
				}
			}
		}
		allowed = allowed || holds
	}
	return allowed
}

// condition evaluates one condition operator, as IAM's policy reference
// says: a key absent from the request fails it (IfExists aside); several
// values are alternatives; a single-valued key under ForAnyValue is a set
// of one.
func condition(t *testing.T, op string, keys map[string]string, key string, values []string) bool {
	t.Helper()
	op = strings.TrimPrefix(op, "ForAnyValue:")
	ifExists := strings.HasSuffix(op, "IfExists")
	op = strings.TrimSuffix(op, "IfExists")
	got, present := keys[key]
	if !present {
		return ifExists
	}
	var match func(pattern string) bool
	switch op {
	case "StringEquals", "ArnEquals":
		match = func(p string) bool { return p == got }
	case "StringLike", "ArnLike":
		match = func(p string) bool { return like(p, got) }
	default:
		t.Fatalf("condition operator %s: the evaluator does not know it; teach it before a trust policy uses it", op)
	}
	return slices.ContainsFunc(values, match)
}

// like is StringLike's match: * any run of characters, ? any one, case
// sensitive.
func like(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if like(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && like(pattern[1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && like(pattern[1:], s[1:])
}

func TestTheRoleTrustsTheBoundAppsCertificatesAlone(t *testing.T) {
	for _, template := range roleTemplates(t) {
		t.Run(filepath.Base(filepath.Dir(template)), func(t *testing.T) { roleTrustsTheBoundAppAlone(t, template) })
	}
}

func roleTrustsTheBoundAppAlone(t *testing.T, template string) {
	policy := trustPolicy(t, template, boundApp, trustAnchor)
	units := func(org, space, app string) []string {
		return []string{"organization:" + org, "space:" + space, "app:" + app}
	}
	assume := func(cert *x509.Certificate, anchor string, m mapping) bool {
		keys := principalTags(t, cert, m)
		keys["aws:SourceArn"] = anchor
		for _, action := range []string{"sts:AssumeRole", "sts:TagSession", "sts:SetSourceIdentity"} {
			if !allows(t, policy, "rolesanywhere.amazonaws.com", action, keys) {
				return false
			}
		}
		return true
	}

	t.Run("Diego's subject holds the three organizational units in one multi-valued RDN, the app's first", func(t *testing.T) {
		cert := instanceIdentity(t, anInstance, units(theOrg, theSpace, boundApp)...)
		want := "CN=" + anInstance + ",OU=app:" + boundApp + "+OU=space:" + theSpace + "+OU=organization:" + theOrg
		if got := cert.Subject.String(); got != want {
			t.Errorf("subject %s, want %s", got, want)
		}
	})

	refused := []struct {
		name   string
		cert   *x509.Certificate
		anchor string
	}{
		{"another app of the same space and organization", instanceIdentity(t, anInstance, units(theOrg, theSpace, otherApp)...), trustAnchor},
		{"another app whose space has the bound app's GUID", instanceIdentity(t, anInstance, units(theOrg, boundApp, otherApp)...), trustAnchor},
		{"another app whose organization has the bound app's GUID", instanceIdentity(t, anInstance, units(boundApp, theSpace, otherApp)...), trustAnchor},
		{"another app whose instance (the common name) has the bound app's GUID", instanceIdentity(t, boundApp, units(theOrg, theSpace, otherApp)...), trustAnchor},
		{"a certificate with the bound app's GUID but no app: prefix", instanceIdentity(t, anInstance, "organization:"+theOrg, "space:"+theSpace, boundApp), trustAnchor},
		{"the bound app's certificate, issued under another trust anchor", instanceIdentity(t, anInstance, units(theOrg, theSpace, boundApp)...), otherAnchor},
	}
	for _, m := range mappings {
		t.Run("with the tag holding "+m.name, func(t *testing.T) {
			for _, r := range refused {
				t.Run(r.name+" is refused", func(t *testing.T) {
					if assume(r.cert, r.anchor, m) {
						t.Errorf("admitted; tags %v", principalTags(t, r.cert, m))
					}
				})
			}
		})
	}

	bound := instanceIdentity(t, anInstance, units(theOrg, theSpace, boundApp)...)
	t.Run("the bound app's certificate is admitted when the tag holds its value first or all the values", func(t *testing.T) {
		for _, m := range mappings[:2] {
			if !assume(bound, trustAnchor, m) {
				t.Errorf("%s: refused; tags %v", m.name, principalTags(t, bound, m))
			}
		}
	})
	t.Run("and refused, closed, when the tag held only another value: no certificate is admitted then", func(t *testing.T) {
		if m := mappings[2]; assume(bound, trustAnchor, m) {
			t.Errorf("%s: admitted; tags %v", m.name, principalTags(t, bound, m))
		}
	})
	t.Run("a request without the tag at all (a profile that maps no OU) is refused", func(t *testing.T) {
		keys := map[string]string{"aws:SourceArn": trustAnchor, "aws:PrincipalTag/x509Subject/CN": anInstance}
		if allows(t, policy, "rolesanywhere.amazonaws.com", "sts:AssumeRole", keys) {
			t.Error("admitted")
		}
	})
	t.Run("no other principal may assume it", func(t *testing.T) {
		keys := principalTags(t, bound, mappings[0])
		keys["aws:SourceArn"] = trustAnchor
		if allows(t, policy, "ec2.amazonaws.com", "sts:AssumeRole", keys) {
			t.Error("EC2 may assume it")
		}
	})
	t.Run("the profile maps the subject's CN and OU, which the condition reads", func(t *testing.T) {
		doc := readTemplateNode(t, template)
		v, err := templateValues{}.eval(nodeAt(doc, "Resources", "Profile", "Properties", "AttributeMappings"))
		if err != nil {
			t.Fatal(err)
		}
		want := []any{map[string]any{"CertificateField": "x509Subject",
			"MappingRules": []any{map[string]any{"Specifier": "CN"}, map[string]any{"Specifier": "OU"}}}}
		if fmt.Sprint(v) != fmt.Sprint(want) {
			t.Errorf("attribute mappings %v, want %v", v, want)
		}
	})
}

func TestTheTrustPolicyEvaluator(t *testing.T) {
	// The evaluator is what the test above rests on: it must refuse as
	// IAM does.
	tests := []struct {
		name   string
		op     string
		values []string
		keys   map[string]string
		want   bool
	}{
		{"StringLike matches a run of anything", "StringLike", []string{"*app:x*"}, map[string]string{"k": "a+app:x+b"}, true},
		{"StringLike is case sensitive", "StringLike", []string{"*app:x*"}, map[string]string{"k": "APP:X"}, false},
		{"StringLike's ? is one character", "StringLike", []string{"a?c"}, map[string]string{"k": "abbc"}, false},
		{"an absent key fails", "StringEquals", []string{"v"}, map[string]string{}, false},
		{"an absent key passes IfExists", "StringEqualsIfExists", []string{"v"}, map[string]string{}, true},
		{"values are alternatives", "ArnEquals", []string{"a", "b"}, map[string]string{"k": "b"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := condition(t, tt.op, tt.keys, "k", tt.values); got != tt.want {
				t.Errorf("%s %v on %v = %v, want %v", tt.op, tt.values, tt.keys, got, tt.want)
			}
		})
	}
}
