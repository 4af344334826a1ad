//go:build osb_without_s3

package cloudformation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// TestReadTemplateWithoutS3 runs in the bootstraps' build without the S3
// client (make build's osb_without_s3, when every template is within
// MaxTemplateBody; TestTheBootstrapsBuiltWithoutLeaveItOut in
// internal/tools/build runs it): a template over it, which would go
// through S3, is refused at start, saying to build the bundles.
func TestReadTemplateWithoutS3(t *testing.T) {
	dir := t.TempDir()
	body := instanceTemplate + "\n#" + strings.Repeat(" padding", MaxTemplateBody/8) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "instance.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readTemplate(KeyTemplate, "instance.yaml", dir)
	if err == nil || !strings.Contains(err.Error(), "built without (build tag osb_without_s3") || !strings.Contains(err.Error(), "make build") {
		t.Errorf("a template over MaxTemplateBody: error %v, want one saying to build the bundles", err)
	}
	if err := NewS3(aws.Config{Region: "us-east-1"}).PutObject(t.Context(), "bucket", "key", "body", ""); err == nil {
		t.Error("the S3 client of a build without it put an object")
	}
}
