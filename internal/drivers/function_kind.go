//go:build !osb_without_function

package drivers

import (
	"context"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/drivers/function"
)

// functionKind is the driver that delegates each change to the service
// owner's own function: a Lambda function, or an HTTPS endpoint.
func functionKind() Kind {
	return Kind{
		Name: "function",
		Configure: func(plan *catalog.Plan, config map[string]any, dir string) (any, error) {
			s, err := function.Configure(plan, config, dir)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		Ready: func(settings any, env Env) error {
			s, ok := settings.(*function.Settings)
			if !ok || s == nil {
				return nil
			}
			return s.Target.Ready(env.Getenv)
		},
		Warning: func(settings any) string {
			if s, ok := settings.(*function.Settings); ok && s != nil {
				return s.Target.Warning()
			}
			return ""
		},
		Needs: func(plans []Configured) deploy.Needs {
			var targets []function.PlanTarget
			for _, p := range plans {
				if s, ok := p.Settings.(*function.Settings); ok && s != nil {
					targets = append(targets, function.PlanTarget{Target: s.Target, Sync: p.Plan.Settings.Mode != catalog.ModeAsyncOnly})
				}
			}
			return function.Needs(targets)
		},
		New: func(_ context.Context, env Env) (broker.Driver, error) {
			d := function.New(env.Resources, env.AWS, env.Getenv, env.Logger)
			if env.Settings != nil {
				d.PlanSettings = func(planID string) (*function.Settings, bool) {
					v, ok := env.Settings(planID)
					s, isFunction := v.(*function.Settings)
					return s, ok && isFunction && s != nil
				}
			}
			return d, nil
		},
	}
}
