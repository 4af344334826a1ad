//go:build !osb_without_cloudformation

package drivers

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/deploy"
	"github.com/serverless-osb/broker/internal/drivers/cloudformation"
	envname "github.com/serverless-osb/broker/internal/env"
)

// cloudformationKind is the driver that makes each instance, and each
// binding of a plan with a binding template, a CloudFormation stack.
func cloudformationKind() Kind {
	return Kind{
		Name: "cloudformation",
		Configure: func(plan *catalog.Plan, config map[string]any, dir string) (any, error) {
			// Stacks take minutes: longer than a platform waits for a
			// synchronous answer. And only the worker function may touch
			// stacks, which it does for asynchronous operations alone.
			if plan.Settings.Mode != catalog.ModeAsyncOnly {
				return nil, catalog.Settingf("mode", "the cloudformation driver runs only %s plans (stacks take longer than a platform waits for a synchronous answer); set mode: %s",
					catalog.ModeAsyncOnly, catalog.ModeAsyncOnly)
			}
			s, err := cloudformation.Configure(plan, config, dir)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		New: func(ctx context.Context, env Env) (broker.Driver, error) {
			if env.Stacks == nil {
				return nil, errors.New("no drivers.Env.Stacks: RunStacks where stacks change (the worker, the local broker), AdmitStacks in the api function")
			}
			return env.Stacks(ctx, env)
		},
		Ready: func(settings any, env Env) error {
			s, ok := settings.(*cloudformation.Settings)
			if !ok || s == nil {
				return nil
			}
			return s.Placement.Ready(env.Getenv)
		},
		// A catalog whose plans name one role with different settings is
		// refused here too, when the bundle is built.
		Needs: func(plans []Configured) deploy.Needs {
			settings := cloudformationSettings(plans)
			roles, _ := cloudformation.RolesOf(settings)
			n := cloudformation.Needs(roles, cloudformation.TemplatesOverBody(settings))
			n.CustomResources = cloudformation.CustomResources(settings)
			n.InTargetCustomResources = cloudformation.InTargetCustomResources(settings)
			return n
		},
		// A role plan without its trust anchor refuses every bind.
		Warning: func(settings any) string { return settings.(*cloudformation.Settings).Warning() },
		Files: func(settings any) []string {
			s := settings.(*cloudformation.Settings)
			files := []string{s.Template.Path}
			if s.BindingTemplate != nil {
				files = append(files, s.BindingTemplate.Path)
			}
			return files
		},
	}
}

// RunStacks is the driver that creates, updates and deletes stacks, with
// the bucket that templates over CloudFormation's body limit go through.
func RunStacks(ctx context.Context, env Env) (broker.Driver, error) {
	d, cfg, getenv, err := newCloudFormation(ctx, env)
	if err != nil {
		return nil, err
	}
	d.Templates = &cloudformation.Templates{
		S3:      cloudformation.NewS3(cfg),
		Account: cloudformation.NewAccount(cfg),
		Region:  cfg.Region,
		Bucket:  getenv(envname.TemplateBucket),
	}
	return d, nil
}

// AdmitStacks is the driver as the api function runs it
// (cloudformation.Admission): it counts a pool's stacks at a provision
// and changes none.
func AdmitStacks(ctx context.Context, env Env) (broker.Driver, error) {
	d, _, _, err := newCloudFormation(ctx, env)
	if err != nil {
		return nil, err
	}
	return cloudformation.Admit(d), nil
}

// newCloudFormation is the driver with its clients and roles, and the AWS
// configuration and getenv it was made with.
func newCloudFormation(ctx context.Context, env Env) (*cloudformation.Driver, aws.Config, func(string) string, error) {
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	dep, err := cloudformation.DeploymentFromEnv(getenv)
	if err != nil {
		return nil, aws.Config{}, nil, err
	}
	if env.AWS == nil {
		return nil, aws.Config{}, nil, errors.New("no AWS configuration to reach CloudFormation with")
	}
	cfg, err := env.AWS(ctx)
	if err != nil {
		return nil, aws.Config{}, nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	roles, err := cloudformation.RolesOf(cloudformationSettings(env.Plans))
	if err != nil {
		return nil, aws.Config{}, nil, err
	}
	d := cloudformation.New(awscfn.NewFromConfig(cfg), env.Resources, dep, env.Logger)
	d.Clients, d.Roles, d.Getenv = cloudformation.NewClients(cfg), roles, getenv
	return d, cfg, getenv, nil
}

// cloudformationSettings are the CloudFormation settings of plans.
func cloudformationSettings(plans []Configured) []*cloudformation.Settings {
	var out []*cloudformation.Settings
	for _, p := range plans {
		if s, ok := p.Settings.(*cloudformation.Settings); ok && s != nil {
			out = append(out, s)
		}
	}
	return out
}
