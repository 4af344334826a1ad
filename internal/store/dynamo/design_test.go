package dynamo

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/itemtest"
)

// names are states as the bullets spell them.
func names[S ~string](states ...S) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// TestTheDesignNamesEveryAttribute holds docs/DESIGN.md's data model to the
// storage types: each kind of item's bullet names, in backquotes, every
// attribute the type stores and nothing else, so that the page a newcomer
// reads lists no state or attribute that is gone, and misses none.
func TestTheDesignNamesEveryAttribute(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	_, model, ok := strings.Cut(string(raw), "\n## Data model")
	if !ok {
		t.Fatal("docs/DESIGN.md has no section \"Data model\"")
	}
	model, _, _ = strings.Cut(model, "\n## ")
	bullets := map[string]string{} // the key the bullet names → the bullet
	for _, b := range strings.Split(model, "\n- ")[1:] {
		// A bullet ends at the blank line after it: the prose after the
		// last one (listings, the bolt file) is no item's.
		b, _, _ = strings.Cut(b, "\n\n")
		key := regexp.MustCompile("`(PK=[^`]*)`").FindStringSubmatch(b)
		if key == nil {
			continue
		}
		bullets[key[1]] = b
	}
	items := []struct {
		key    string
		item   any
		states []string // the domain's states, each of which the bullet names after `state`
	}{
		{"PK=i#<instance_id> SK=instance", instanceItem{}, names(broker.InstanceProvisioning, broker.InstanceReady,
			broker.InstanceUpdating, broker.InstanceDeprovisioning, broker.InstanceFailed)},
		{"PK=i#<instance_id> SK=b#<binding_id>", bindingItem{}, names(broker.BindingCreating, broker.BindingReady,
			broker.BindingDeleting, broker.BindingFailed)},
		{"PK=i#<instance_id> SK=op#<operation_id>", operationItem{}, names(broker.OperationInProgress,
			broker.OperationSucceeded, broker.OperationFailed)},
		{"PK=i#<instance_id> SK=r#<name>", resourceItem{}, nil},
		{"PK=detached SK=<detached_id>", detachedItem{}, names(broker.DetachedPending, broker.DetachedCleaning,
			broker.DetachedFailed)},
		{"PK=broker SK=sealing", sealingItem{}, nil},
		{"PK=campaign#<campaign_id> SK=campaign", campaignItem{}, names(broker.CampaignRunning, broker.CampaignFinished,
			broker.CampaignStopped)},
		{"PK=campaign#<campaign_id> SK=i#<instance_id>", campaignInstanceItem{}, names(broker.ItemPending, broker.ItemRunning,
			broker.ItemBusy, broker.ItemUpgraded, broker.ItemFailed, broker.ItemBlocked, broker.ItemSkipped, broker.ItemNotAttempted,
			broker.ItemWouldChange, broker.ItemWouldRefuse)},
	}
	attribute := regexp.MustCompile("`([a-z_]+)`")
	for _, it := range items {
		t.Run(it.key+" lists its item's attributes", func(t *testing.T) {
			b, ok := bullets[it.key]
			if !ok {
				t.Fatalf("the data model has no bullet for `%s`", it.key)
			}
			var listed []string
			for _, m := range attribute.FindAllStringSubmatch(b, -1) {
				listed = append(listed, m[1])
			}
			var stored []string
			for _, name := range itemtest.Names(it.item, "dynamodbav") {
				if !strings.Contains(name, ".") && name != "PK" && name != "SK" {
					stored = append(stored, name)
				}
			}
			for _, name := range stored {
				if !slices.Contains(listed, name) {
					t.Errorf("%T stores %s, which the bullet does not list", it.item, name)
				}
			}
			for _, name := range listed {
				if !slices.Contains(stored, name) {
					t.Errorf("the bullet lists %s, which %T does not store", name, it.item)
				}
			}
			if it.states == nil {
				return
			}
			m := regexp.MustCompile("`state` \\(([^)]*)\\)").FindStringSubmatch(b)
			if m == nil {
				t.Fatal("the bullet does not list the states after `state` (a | b | …)")
			}
			listed = nil
			for _, state := range strings.Split(m[1], "|") {
				listed = append(listed, strings.Join(strings.Fields(state), " ")) // the bullet wraps lines
			}
			for _, state := range listed {
				if !slices.Contains(it.states, state) {
					t.Errorf("the bullet lists the state %q, which the domain does not have (it has %q)", state, it.states)
				}
			}
			for _, state := range it.states {
				if !slices.Contains(listed, state) {
					t.Errorf("the bullet does not list the state %q", state)
				}
			}
		})
	}
}
