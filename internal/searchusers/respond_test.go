package searchusers_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/serverless-osb/broker/internal/mototest"
	"github.com/serverless-osb/broker/internal/searchusers"
)

// respond sends e through Respond, CloudFormation's answer URL a presigned
// PUT of moto's S3 (as CloudFormation's is of S3), and returns the answer
// as S3 received it.
func respond(f *fixture, h *searchusers.Handler, e cfn.Event) cfn.Response {
	f.t.Helper()
	client := s3.NewFromConfig(mototest.Config(f.t, "eu-west-1"), func(o *s3.Options) { o.UsePathStyle = true })
	bucket, key := mototest.Name("cfn-answers"), mototest.Name("answer")
	if _, err := client.CreateBucket(f.ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraintEuWest1}}); err != nil {
		f.t.Fatal(err)
	}
	presigned, err := s3.NewPresignClient(client).PresignPutObject(f.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)},
		s3.WithPresignExpires(time.Hour))
	if err != nil {
		f.t.Fatal(err)
	}
	e.ResponseURL = presigned.URL
	if err := h.Respond(f.ctx, e); err != nil {
		f.t.Fatal(err)
	}
	obj, err := client.GetObject(f.ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		f.t.Fatal(err)
	}
	defer obj.Body.Close()
	body, _ := io.ReadAll(obj.Body)
	var r cfn.Response
	if err := json.Unmarshal(body, &r); err != nil {
		f.t.Fatalf("the answer %s: %v", body, err)
	}
	return r
}

func TestCloudFormationGetsTheAnswerAndTheLogsNoPassword(t *testing.T) {
	f := newFixture(t)
	logs := &bytes.Buffer{}
	h := &searchusers.Handler{Secrets: f.sm, HTTP: f.plugin.server.Client(), Log: slog.New(slog.NewJSONHandler(logs, nil))}
	const password = "Answer1-Pa55word?"
	b := f.binding("osb-i1-answer", "readwrite", password)

	created := respond(f, h, f.event(cfn.RequestCreate, b, ""))
	t.Run("a create answers SUCCESS with the user as the physical id and its credentials", func(t *testing.T) {
		if created.Status != cfn.StatusSuccess || created.Data["Username"] != created.PhysicalResourceID ||
			created.Data["Password"] != password || created.Data["IndexPattern"] != "app-*" {
			t.Fatalf("answer %s %s %v", created.Status, created.Reason, created.Data)
		}
		if got := f.as(created.PhysicalResourceID, password, http.MethodPut, "/app-x/_doc/1"); got != http.StatusOK {
			t.Errorf("the user's write: %d", got)
		}
	})
	t.Run("an update that moves the user to another domain answers FAILED, and changes nothing", func(t *testing.T) {
		moved := f.binding("osb-i1-answer", "readwrite", password)
		moved.stackID = b.stackID
		moved.props["Host"] = "vpc-other-domain.eu-west-1.es.amazonaws.com"
		e := f.event(cfn.RequestUpdate, moved, created.PhysicalResourceID)
		e.OldResourceProperties = b.props
		r := respond(f, h, e)
		if r.Status != cfn.StatusFailed || !strings.Contains(r.Reason, "cannot move to another domain") || r.PhysicalResourceID != created.PhysicalResourceID {
			t.Errorf("answer %s %q %s", r.Status, r.Reason, r.PhysicalResourceID)
		}
	})
	t.Run("a delete answers SUCCESS, and the user is gone", func(t *testing.T) {
		r := respond(f, h, f.event(cfn.RequestDelete, b, created.PhysicalResourceID))
		if r.Status != cfn.StatusSuccess || f.plugin.snapshot(created.PhysicalResourceID) != "" {
			t.Errorf("answer %s %q; the plugin holds %s", r.Status, r.Reason, f.plugin.snapshot(created.PhysicalResourceID))
		}
	})
	t.Run("the logs are JSON lines that name the user and no password", func(t *testing.T) {
		text := logs.String()
		if !strings.Contains(text, created.PhysicalResourceID) || strings.Contains(text, password) || strings.Contains(text, masterPassword) {
			t.Errorf("logs %s", text)
		}
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			if !json.Valid([]byte(line)) {
				t.Errorf("not JSON: %s", line)
			}
		}
	})
}
