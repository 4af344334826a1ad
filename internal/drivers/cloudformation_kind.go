package drivers

import (
	"context"
	"errors"
	"fmt"
	"os"

	awscfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"

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
			getenv := env.Getenv
			if getenv == nil {
				getenv = os.Getenv
			}
			dep, err := cloudformation.DeploymentFromEnv(getenv)
			if err != nil {
				return nil, err
			}
			if env.AWS == nil {
				return nil, errors.New("no AWS configuration to reach CloudFormation with")
			}
			cfg, err := env.AWS(ctx)
			if err != nil {
				return nil, fmt.Errorf("load the AWS configuration: %w", err)
			}
			d := cloudformation.New(awscfn.NewFromConfig(cfg), env.Resources, dep, env.Logger)
			d.Templates = &cloudformation.Templates{
				// An endpoint of one's own (moto, locally) serves buckets
				// by path, not by host name.
				S3:      s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = cfg.BaseEndpoint != nil }),
				Account: sts.NewFromConfig(cfg),
				Region:  cfg.Region,
				Bucket:  getenv(envname.TemplateBucket),
			}
			return d, nil
		},
		Needs: func([]Configured) deploy.Needs { return cloudformation.Needs() },
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
