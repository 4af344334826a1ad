package catalog

import (
	"slices"
	"strings"
	"testing"
)

// goodNetwork is a network with every key.
func goodNetwork() map[string]any {
	return map[string]any{
		"vpc_id":                   "vpc-0123456789abcdef0",
		"subnet_ids":               []any{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"},
		"client_cidr":              "10.0.0.0/16",
		"client_security_group_id": "sg-0123456789abcdef0",
	}
}

// TestPlansTakeTheirNetworkFromTheCatalog: a plan names a network of the
// catalog's top-level networks, or takes the one marked default; the
// catalog serves neither.
func TestPlansTakeTheirNetworkFromTheCatalog(t *testing.T) {
	c := smallCatalog()
	other := goodNetwork()
	other["default"] = true
	delete(other, "client_security_group_id")
	away := goodNetwork()
	away["account"], away["region"] = "123456789012", "eu-west-1"
	c["networks"] = map[string]any{"main": goodNetwork(), "shared": other, "away": away}
	plan(c, 0, 0)["broker"] = map[string]any{"driver": "demo", "network": "main"}
	plan(c, 0, 1)["broker"] = map[string]any{"driver": "demo"}
	cat, err := Parse("good.yaml", toYAML(t, c))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range cat.Networks() {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"away", "main", "shared"}) {
		t.Fatalf("Networks() = %v, want away, main and shared", names)
	}
	if a := cat.Networks()[0]; a.Account != "123456789012" || a.Region != "eu-west-1" || !a.Placed() || cat.Networks()[1].Placed() {
		t.Errorf("away = %+v (placed %v), main placed %v: want away in 123456789012, eu-west-1 and main at home", a, a.Placed(), cat.Networks()[1].Placed())
	}
	named, byDefault := cat.Services()[0].Plans[0].Settings, cat.Services()[0].Plans[1].Settings
	if named.Network == nil || named.Network.Name != "main" || !named.NetworkNamed {
		t.Errorf("the plan naming main got %+v (named %v)", named.Network, named.NetworkNamed)
	}
	if n := named.Network; n != nil && (n.VpcID != "vpc-0123456789abcdef0" || !slices.Equal(n.SubnetIDs, []string{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"}) ||
		n.ClientCIDR != "10.0.0.0/16" || n.ClientSecurityGroupID != "sg-0123456789abcdef0") {
		t.Errorf("main = %+v, not as written", n)
	}
	if byDefault.Network == nil || byDefault.Network.Name != "shared" || byDefault.NetworkNamed {
		t.Errorf("the plan naming none got %+v (named %v), want the default shared", byDefault.Network, byDefault.NetworkNamed)
	}
	t.Run("a list: the networks of a placed plan's places", func(t *testing.T) {
		c := smallCatalog()
		a, b := goodNetwork(), goodNetwork()
		a["account"], a["region"] = "111111111111", "eu-west-1"
		b["account"], b["region"] = "222222222222", "eu-west-1"
		c["networks"] = map[string]any{"a": a, "b": b}
		plan(c, 0, 0)["broker"] = map[string]any{"driver": "demo", "network": []any{"b", "a"}}
		cat, err := Parse("good.yaml", toYAML(t, c))
		if err != nil {
			t.Fatal(err)
		}
		st := cat.Services()[0].Plans[0].Settings
		if len(st.Networks) != 2 || st.Networks[0].Name != "b" || st.Networks[1].Name != "a" || st.Network != nil || !st.NetworkNamed {
			t.Errorf("Networks %v, Network %v, named %v: want b and a, as listed", st.Networks, st.Network, st.NetworkNamed)
		}
	})
	if body := string(cat.JSON()); strings.Contains(body, "vpc-0123456789abcdef0") || strings.Contains(body, "network") {
		t.Errorf("the served catalog shows the networks: %s", body)
	}
}

func TestBadNetworks(t *testing.T) {
	type obj = map[string]any
	with := func(change func(n obj)) func(c obj) {
		return func(c obj) {
			n := goodNetwork()
			change(n)
			c["networks"] = obj{"main": n}
		}
	}
	tests := []struct {
		name  string
		spoil func(c obj)
		want  string
	}{
		{"a network without a VPC", with(func(n obj) { delete(n, "vpc_id") }),
			`bad.yaml: networks.main.vpc_id: is required`},
		{"a VPC id that is not one", with(func(n obj) { n["vpc_id"] = "default" }),
			`bad.yaml: networks.main.vpc_id: "default" is not a VPC id (vpc-0123456789abcdef0)`},
		{"one subnet", with(func(n obj) { n["subnet_ids"] = []any{"subnet-0123456789abcdef0"} }),
			`bad.yaml: networks.main.subnet_ids: names 1 subnets; RDS and the other services want at least two`},
		{"no subnets", with(func(n obj) { delete(n, "subnet_ids") }),
			`bad.yaml: networks.main.subnet_ids: is required: at least two private subnets`},
		{"a subnet id that is not one", with(func(n obj) { n["subnet_ids"] = []any{"subnet-0123456789abcdef0", "10.0.1.0/24"} }),
			`bad.yaml: networks.main.subnet_ids[1]: "10.0.1.0/24" is not a subnet id`},
		{"a subnet named twice", with(func(n obj) { n["subnet_ids"] = []any{"subnet-0123456789abcdef0", "subnet-0123456789abcdef0"} }),
			`bad.yaml: networks.main.subnet_ids[1]: subnet-0123456789abcdef0 is named twice`},
		{"a CIDR that is not one", with(func(n obj) { n["client_cidr"] = "10.0.0.0/33" }),
			`bad.yaml: networks.main.client_cidr: "10.0.0.0/33" is not an IPv4 CIDR`},
		{"a security group id that is not one", with(func(n obj) { n["client_security_group_id"] = "apps" }),
			`bad.yaml: networks.main.client_security_group_id: "apps" is not a security group id`},
		{"a network that admits no client", with(func(n obj) { delete(n, "client_cidr"); delete(n, "client_security_group_id") }),
			`bad.yaml: networks.main: admits no client: give client_cidr`},
		{"an unknown key", with(func(n obj) { n["subnets"] = []any{} }),
			`bad.yaml: networks.main.subnets: unknown key; a network has vpc_id, subnet_ids`},
		{"an account that is not one", with(func(n obj) { n["account"], n["region"] = "1234", "eu-west-1" }),
			`bad.yaml: networks.main.account: "1234" is not an account id (12 digits)`},
		{"a Region that is not one", with(func(n obj) { n["account"], n["region"] = "123456789012", "Ireland" }),
			`bad.yaml: networks.main.region: "Ireland" is not a Region name`},
		{"an account without its Region", with(func(n obj) { n["account"] = "123456789012" }),
			`bad.yaml: networks.main: names its account or its Region without the other`},
		{"a Region without its account", with(func(n obj) { n["region"] = "eu-west-1" }),
			`bad.yaml: networks.main: names its account or its Region without the other`},
		{"a default in another account", with(func(n obj) { n["account"], n["region"], n["default"] = "123456789012", "eu-west-1", true }),
			`bad.yaml: networks.main.default: a network in another account and Region (123456789012, eu-west-1) serves only the plans placed there`},
		{"a name with capitals", func(c obj) { c["networks"] = obj{"Main": goodNetwork()} },
			`bad.yaml: networks.Main: a network's name is a lower-case letter`},
		{"two defaults", func(c obj) {
			a, b := goodNetwork(), goodNetwork()
			a["default"], b["default"] = true, true
			c["networks"] = obj{"a": a, "b": b}
		}, `bad.yaml: networks: a and b are all marked default`},
		{"a plan naming a network the catalog lacks", func(c obj) {
			c["networks"] = obj{"main": goodNetwork()}
			plan(c, 0, 0)["broker"] = obj{"driver": "demo", "network": "mian"}
		}, `bad.yaml: services[0].plans[0].broker.network: names the network "mian", which the catalog does not declare; it declares main`},
		{"a list naming a network beside the broker", func(c obj) {
			away := goodNetwork()
			away["account"], away["region"] = "111111111111", "eu-west-1"
			c["networks"] = obj{"main": goodNetwork(), "away": away}
			plan(c, 0, 0)["broker"] = obj{"driver": "demo", "network": []any{"away", "main"}}
		}, `bad.yaml: services[0].plans[0].broker.network[1]: names the network main, which is beside the broker: a list names the networks of a placed plan's places`},
		{"a list naming two networks of one place", func(c obj) {
			a, b := goodNetwork(), goodNetwork()
			a["account"], a["region"] = "111111111111", "eu-west-1"
			b["account"], b["region"] = "111111111111", "eu-west-1"
			c["networks"] = obj{"a": a, "b": b}
			plan(c, 0, 0)["broker"] = obj{"driver": "demo", "network": []any{"a", "b"}}
		}, `bad.yaml: services[0].plans[0].broker.network[1]: names the network b, in account 111111111111, eu-west-1, where a is too: one network per place`},
		{"an empty list", func(c obj) {
			c["networks"] = obj{"main": goodNetwork()}
			plan(c, 0, 0)["broker"] = obj{"driver": "demo", "network": []any{}}
		}, `bad.yaml: services[0].plans[0].broker.network: names no network`},
		{"a list naming a network the catalog lacks", func(c obj) {
			c["networks"] = obj{"main": goodNetwork()}
			plan(c, 0, 0)["broker"] = obj{"driver": "demo", "network": []any{"mian"}}
		}, `bad.yaml: services[0].plans[0].broker.network[0]: names the network "mian", which the catalog does not declare`},
		{"a plan naming a network in a catalog without any", func(c obj) {
			plan(c, 0, 0)["broker"] = obj{"driver": "demo", "network": "main"}
		}, `bad.yaml: services[0].plans[0].broker.network: names the network "main", but the catalog has no networks`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := smallCatalog()
			tt.spoil(c)
			checkRefused(t, toYAML(t, c), tt.want)
		})
	}
}
