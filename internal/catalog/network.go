package catalog

import (
	"maps"
	"regexp"
	"slices"
	"sync"
)

// Network is where a plan's databases, caches and search domains live: a
// VPC, its subnets, and who may connect. The catalog's top-level networks
// name them; a plan picks one with broker.network, or takes the one marked
// default. The CloudFormation driver fixes the templates' VpcId, SubnetIds,
// ClientCidr and ClientSecurityGroupId from it (users cannot set them),
// and the broker's stack deploys a Custom::DatabaseUser function in each
// network's VPC (infra).
type Network struct {
	// Name is the network's key in the catalog.
	Name string
	// VpcID and SubnetIDs (at least two, in different Availability Zones)
	// are where the resources go.
	VpcID     string
	SubnetIDs []string
	// ClientCIDR and ClientSecurityGroupID admit applications (and the
	// Custom::DatabaseUser function) on the resource's port; at least one
	// is set.
	ClientCIDR            string
	ClientSecurityGroupID string
	// Default says that plans which name no network take this one.
	Default bool
	// Account and Region, both or neither, are where the VPC is when it is
	// not the broker's own account and Region: a network for the plans a
	// placement puts there (their stacks are made there, and the target
	// stack deploys the Custom::DatabaseUser function in its VPC); only a
	// plan placed in that account and Region may take it. Neither: the
	// broker's, where the broker's stack deploys that function.
	Account, Region string
}

// Placed says whether the network is in another account and Region than
// the broker's (Account and Region).
func (n *Network) Placed() bool { return n != nil && n.Account != "" }

// networkKeys are a network's keys.
var networkKeys = []string{"vpc_id", "subnet_ids", "client_cidr", "client_security_group_id", "default", "account", "region"}

// RegionPattern is the shape of every Region name (us-east-1, eu-central-2,
// us-gov-west-1, cn-northwest-1, ap-southeast-5), unanchored: the catalog,
// the driver's placements and the target stack's parameter check the same.
const RegionPattern = `[a-z]{2}(-[a-z]+)+-[0-9]{1,2}`

// The shapes of a network's fields, and RegionName, which matches a whole
// Region name, compiled when first used (a catalog naming a network, a
// plan placed in a Region): most catalogs use none, and compiling them at
// package init was about 0.2 ms of every function's cold start.
var (
	RegionName    = lazyPattern(`^` + RegionPattern + `$`)
	networkName   = lazyPattern(`^[a-z][a-z0-9-]{0,31}$`)
	vpcPattern    = lazyPattern(`^vpc-[0-9a-f]{8,17}$`)
	subnetPattern = lazyPattern(`^subnet-[0-9a-f]{8,17}$`)
	groupPattern  = lazyPattern(`^sg-[0-9a-f]{8,17}$`)
	accountID     = lazyPattern(`^[0-9]{12}$`)
	cidrPattern   = lazyPattern(`^(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])){3}/([0-9]|[12][0-9]|3[0-2])$`)
)

// lazyPattern is the regular expression expr, compiled on first use.
func lazyPattern(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// Networks are the catalog's networks, sorted by name.
func (c *Catalog) Networks() []*Network { return c.networks }

// networks checks the top-level networks mapping.
func (ck *checker) networks(root map[string]any) map[string]*Network {
	out := map[string]*Network{}
	m, ok := ck.object(root, "", "networks")
	if !ok {
		return out
	}
	var defaults []string
	for _, name := range sortedKeys(m) {
		p := field("networks", name)
		if !networkName().MatchString(name) {
			ck.problem(p, "a network's name is a lower-case letter, then up to 31 lower-case letters, digits or hyphens")
			continue
		}
		obj, ok := m[name].(map[string]any)
		if !ok {
			ck.problem(p, "must be an object (vpc_id, subnet_ids, client_cidr, client_security_group_id, default, account, region), got %s", Describe(m[name]))
			continue
		}
		for _, k := range sortedKeys(obj) {
			if !slices.Contains(networkKeys, k) {
				ck.problem(field(p, k), "unknown key; a network has vpc_id, subnet_ids, client_cidr, client_security_group_id, default, account and region")
			}
		}
		n := &Network{Name: name}
		n.VpcID = ck.shaped(obj, p, "vpc_id", true, vpcPattern(), "a VPC id (vpc-0123456789abcdef0)")
		if _, present := obj["subnet_ids"]; !present {
			ck.problem(field(p, "subnet_ids"), "is required: at least two private subnets of the VPC, in different Availability Zones")
		}
		n.SubnetIDs = ck.stringList(obj, p, "subnet_ids")
		for i, s := range n.SubnetIDs {
			if !subnetPattern().MatchString(s) {
				ck.problem(index(field(p, "subnet_ids"), i), "%q is not a subnet id (subnet-0123456789abcdef0)", s)
			}
			if slices.Index(n.SubnetIDs, s) != i {
				ck.problem(index(field(p, "subnet_ids"), i), "%s is named twice", s)
			}
		}
		if _, present := obj["subnet_ids"]; present && len(n.SubnetIDs) < 2 {
			ck.problem(field(p, "subnet_ids"), "names %d subnets; RDS and the other services want at least two, in different Availability Zones", len(n.SubnetIDs))
		}
		n.ClientCIDR = ck.shaped(obj, p, "client_cidr", false, cidrPattern(), "an IPv4 CIDR (10.0.0.0/16)")
		n.ClientSecurityGroupID = ck.shaped(obj, p, "client_security_group_id", false, groupPattern(), "a security group id (sg-0123456789abcdef0)")
		if _, cidr := obj["client_cidr"]; !cidr {
			if _, group := obj["client_security_group_id"]; !group {
				ck.problem(p, "admits no client: give client_cidr (the range your applications connect from), client_security_group_id (a security group they are members of), or both; without either nothing could reach its databases")
			}
		}
		n.Account = ck.shaped(obj, p, "account", false, accountID(), "an account id (12 digits)")
		n.Region = ck.shaped(obj, p, "region", false, RegionName(), "a Region name (eu-west-1)")
		_, account := obj["account"]
		_, region := obj["region"]
		if account != region {
			ck.problem(p, "names its account or its Region without the other: a network in another place than the broker's names both (where the VPC is), a network beside the broker neither")
		}
		n.Default, _ = ck.boolean(obj, p, "default", false)
		if n.Default && n.Placed() {
			ck.problem(field(p, "default"), "a network in another account and Region (%s, %s) serves only the plans placed there, which name it: it cannot be the default of every plan", n.Account, n.Region)
		}
		if n.Default {
			defaults = append(defaults, name)
		}
		out[name] = n
	}
	if len(defaults) > 1 {
		ck.problem("networks", "%s are all marked default; at most one network is the default of plans that name none", quoteList(defaults))
	}
	return out
}

// shaped reads the string at key of obj (at path p), and says so when it
// is not of the shape re matches: what it should be, and an example.
func (ck *checker) shaped(obj map[string]any, p, key string, required bool, re *regexp.Regexp, what string) string {
	v := ck.str(obj, p, key, required)
	if v != "" && !re.MatchString(v) {
		ck.problem(field(p, key), "%q is not %s", v, what)
	}
	return v
}

// network resolves a plan's broker.network: the network it names, the
// networks a list names (a placed plan's, one per account and Region of
// its places: the driver checks them against the placement), or the
// catalog's default (which a plan whose templates take no network
// ignores).
func (ck *checker) network(st *Settings, b map[string]any, networks map[string]*Network) {
	v, ok := b["network"]
	if !ok {
		for _, n := range networks {
			if n.Default {
				st.Network = n
			}
		}
		return
	}
	key := field(st.Path, "network")
	if list, isList := v.([]any); isList {
		if len(list) == 0 {
			ck.problem(key, "names no network; name one, or a list of the networks of a placed plan's places")
			return
		}
		places := map[string]string{}
		for i, e := range list {
			name, _ := e.(string)
			n := ck.namedNetwork(index(key, i), name, e, networks)
			if n == nil {
				continue
			}
			if !n.Placed() {
				ck.problem(index(key, i), "names the network %s, which is beside the broker: a list names the networks of a placed plan's places, each with account and region; name a network beside the broker alone", name)
				continue
			}
			place := n.Account + " " + n.Region
			if other, taken := places[place]; taken {
				ck.problem(index(key, i), "names the network %s, in account %s, %s, where %s is too: one network per place", name, n.Account, n.Region, other)
				continue
			}
			places[place] = name
			st.Networks = append(st.Networks, n)
		}
		st.NetworkNamed = true
		return
	}
	name, _ := v.(string)
	if n := ck.namedNetwork(key, name, v, networks); n != nil {
		st.Network, st.NetworkNamed = n, true
	}
}

// namedNetwork is the network name (the value v at key) names, or nil
// after saying what is wrong.
func (ck *checker) namedNetwork(key, name string, v any, networks map[string]*Network) *Network {
	if name == "" {
		ck.problem(key, "must be the name of a network of the catalog's networks (or a list of them), got %s", Describe(v))
		return nil
	}
	n, ok := networks[name]
	if ok {
		return n
	}
	names := slices.Sorted(maps.Keys(networks))
	if len(names) == 0 {
		ck.problem(key, "names the network %q, but the catalog has no networks; declare it under the top-level networks", name)
		return nil
	}
	ck.problem(key, "names the network %q, which the catalog does not declare; it declares %s", name, quoteList(names))
	return nil
}

func quoteList(names []string) string {
	out := ""
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			out += " and "
		default:
			out += ", "
		}
		out += n
	}
	return out
}
