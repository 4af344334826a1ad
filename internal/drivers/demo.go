package drivers

import (
	"context"
	"maps"
	"slices"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/drivers/demo"
)

func demoKind() Kind {
	return Kind{
		Name: "demo",
		Configure: func(_ *catalog.Plan, config map[string]any, _ string) (any, error) {
			for _, k := range slices.Sorted(maps.Keys(config)) {
				return nil, catalog.Settingf(k, "the demo driver has no settings; a broker block holds %s", catalog.BrokerKeys())
			}
			return nil, nil
		},
		New: func(_ context.Context, env Env) (broker.Driver, error) {
			return demo.New(), nil
		},
	}
}
