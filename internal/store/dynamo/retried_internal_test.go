package dynamo

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestSameItemComparesAsDynamoDB(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	item := func(kv ...any) map[string]types.AttributeValue {
		m := map[string]types.AttributeValue{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(types.AttributeValue)
		}
		return m
	}
	nested := func(v string) types.AttributeValue {
		return &types.AttributeValueMemberM{Value: item("l", &types.AttributeValueMemberL{Value: []types.AttributeValue{s(v), n("2")}})}
	}
	for _, c := range []struct {
		name string
		a, b map[string]types.AttributeValue
		same bool
	}{
		{"equal", item("PK", s("a"), "n", n("1")), item("PK", s("a"), "n", n("1")), true},
		{"numbers by value", item("n", n("1")), item("n", n("1.0")), true},
		{"another number", item("n", n("1")), item("n", n("2")), false},
		{"a number is not its string", item("n", n("1")), item("n", s("1")), false},
		{"another string", item("PK", s("a")), item("PK", s("b")), false},
		{"an attribute more", item("PK", s("a")), item("PK", s("a"), "x", s("")), false},
		{"another attribute", item("PK", s("a")), item("QK", s("a")), false},
		{"nested", item("m", nested("x")), item("m", nested("x")), true},
		{"nested differs", item("m", nested("x")), item("m", nested("y")), false},
		{"sets in any order", item("ss", &types.AttributeValueMemberSS{Value: []string{"a", "b"}}),
			item("ss", &types.AttributeValueMemberSS{Value: []string{"b", "a"}}), true},
		{"another set", item("ss", &types.AttributeValueMemberSS{Value: []string{"a", "b"}}),
			item("ss", &types.AttributeValueMemberSS{Value: []string{"a", "c"}}), false},
		{"number sets by value", item("ns", &types.AttributeValueMemberNS{Value: []string{"1", "2"}}),
			item("ns", &types.AttributeValueMemberNS{Value: []string{"2.0", "1"}}), true},
		{"bytes", item("b", &types.AttributeValueMemberB{Value: []byte{1}}), item("b", &types.AttributeValueMemberB{Value: []byte{1}}), true},
		{"other bytes", item("b", &types.AttributeValueMemberB{Value: []byte{1}}), item("b", &types.AttributeValueMemberB{Value: []byte{2}}), false},
		{"a list's order counts", item("l", &types.AttributeValueMemberL{Value: []types.AttributeValue{s("a"), s("b")}}),
			item("l", &types.AttributeValueMemberL{Value: []types.AttributeValue{s("b"), s("a")}}), false},
		{"bool", item("t", &types.AttributeValueMemberBOOL{Value: true}), item("t", &types.AttributeValueMemberBOOL{Value: false}), false},
		{"none stored", item("PK", s("a")), nil, false},
	} {
		if got := sameItem(c.a, c.b); got != c.same {
			t.Errorf("%s: sameItem %v, want %v", c.name, got, c.same)
		}
		if got := sameItem(c.b, c.a); got != c.same {
			t.Errorf("%s, the other way: sameItem %v, want %v", c.name, got, c.same)
		}
	}
	// A missing attribute (ReplaceSecret's, of a stored item without it)
	// is no value's same.
	if sameValue(nil, s("a")) || sameValue(s("a"), nil) || sameValue(nil, nil) {
		t.Error("sameValue took a missing attribute for a value")
	}
}
