package broker_test

import (
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

func TestCampaignOptionsCheck(t *testing.T) {
	cat, err := catalog.Parse("test-catalog.yaml", []byte(testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    broker.CampaignOptions
		want string // "" for none
	}{
		{"a plan, limits in range", broker.CampaignOptions{PlanIDs: []string{planSync}, MaxInFlight: 3, MaxFailures: 1}, ""},
		{"no plan", broker.CampaignOptions{MaxInFlight: 3, MaxFailures: 1}, "--plan ID"},
		{"an unknown plan", broker.CampaignOptions{PlanIDs: []string{"nope"}, MaxInFlight: 3, MaxFailures: 1}, "plan nope is not in the catalog"},
		{"a plan without maintenance_info", broker.CampaignOptions{PlanIDs: []string{planAsync}, MaxInFlight: 3, MaxFailures: 1}, "no maintenance_info"},
		{"too many in flight", broker.CampaignOptions{All: true, MaxInFlight: 51, MaxFailures: 1}, "1 to 50"},
		{"no failure allowed", broker.CampaignOptions{All: true, MaxInFlight: 1, MaxFailures: 0}, "max failures"},
		{"canaries two ways", broker.CampaignOptions{All: true, MaxInFlight: 1, MaxFailures: 1, Canaries: 2, CanaryOrgs: []string{"o"}}, "one way"},
		{"skipped and deferred", broker.CampaignOptions{All: true, MaxInFlight: 1, MaxFailures: 1, Skip: []string{"i-1", "i-2"}, Defer: []string{"i-2"}},
			"instance i-2 is named to skip and to defer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Check(cat)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
