package infra

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
)

// samEnvFile is the environment file events/README.md tells SAM CLI users
// to copy to env.json: SAM gives a function's declared variable the file's
// value, and otherwise its value in the template, where a reference
// (Ref, Fn::GetAtt, Fn::Join) becomes a logical id the function refuses.
const samEnvFile = "events/sam/env.example.json"

// arnLike is what a variable named *_ARN must hold.
var arnLike = regexp.MustCompile(`^arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:[0-9]{12}:.+$`)

func TestSAMEnvironmentFileMatchesTheTemplate(t *testing.T) {
	text, err := os.ReadFile(samEnvFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Parameters map[string]string `json:"Parameters"`
	}
	if err := json.Unmarshal(text, &file); err != nil {
		t.Fatalf("%s: %v", samEnvFile, err)
	}
	declared := map[string]bool{}
	functions := map[string]app.Function{"ApiFunction": app.FunctionAPI, "WorkerFunction": app.FunctionWorker}
	for _, id := range slices.Sorted(maps.Keys(functions)) {
		vars := properties(t, id)["Environment"].(object)["Variables"].(object)
		env := map[string]string{}
		for name, value := range vars {
			declared[name] = true
			if literal, ok := value.(string); ok {
				env[name] = literal
				continue
			}
			given, ok := file.Parameters[name]
			switch {
			case !ok:
				t.Errorf("%s: %s is a reference in the template (%v) and missing from %s", id, name, value, samEnvFile)
			case strings.HasSuffix(name, "_ARN") && !arnLike.MatchString(given):
				t.Errorf("%s: %s=%q in %s is not an ARN", samEnvFile, name, given, id)
			case given == "":
				t.Errorf("%s: %s is empty", samEnvFile, name)
			}
			env[name] = given
		}
		t.Run("the "+id+" starts with the template's and the file's variables", func(t *testing.T) {
			env["AWS_REGION"] = "eu-west-1" // SAM sets it
			for name, value := range env {
				t.Setenv(name, value)
			}
			if _, err := app.LambdaConfigFromEnv(functions[id]); err != nil {
				t.Errorf("the function would refuse to start: %v", err)
			}
		})
	}
	for name := range file.Parameters {
		if !declared[name] {
			t.Errorf("%s sets %s, which no function declares: SAM ignores it", samEnvFile, name)
		}
	}
}
