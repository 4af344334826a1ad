package motoserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/serverless-osb/broker/internal/mototest/motoserver"
	"github.com/serverless-osb/broker/internal/waittest"
)

// TestS3AcceptsWhatItsClientsSignUnderIAMEnforcement: with IAM enforced,
// as the sandbox runs moto, S3 calls whose query or key holds characters a
// client percent-encodes (a listing's delimiter=%2F, as `aws s3 ls
// s3://BUCKET` sends, a prefix or key with a space, "+", "=", "&" or a
// non-ASCII letter) are checked against the signature the client made (the
// fixes' sixteenth): moto refused each with SignatureDoesNotMatch, whatever
// the keys.
func TestS3AcceptsWhatItsClientsSignUnderIAMEnforcement(t *testing.T) {
	ctx, cancel := waittest.Context(t)
	defer cancel()
	m, err := motoserver.Start(motoserver.Options{LogPath: t.TempDir() + "/moto.log"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	config := func(id, secret string) aws.Config {
		return aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(m.Endpoint),
			Credentials: credentials.NewStaticCredentialsProvider(id, secret, "")}
	}
	path := func(o *s3.Options) { o.UsePathStyle = true }

	// A user who may do anything in S3, and a bucket, before enforcement.
	admin := config("test", "test")
	im := iam.NewFromConfig(admin)
	if _, err := im.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String("s3-user")}); err != nil {
		t.Fatal(err)
	}
	if _, err := im.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String("s3-user"), PolicyName: aws.String("s3"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}`)}); err != nil {
		t.Fatal(err)
	}
	key, err := im.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String("s3-user")})
	if err != nil {
		t.Fatal(err)
	}
	bucket := aws.String("signed")
	if _, err := s3.NewFromConfig(admin, path).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	enforceIAM(ctx, t, m.Endpoint)

	user := s3.NewFromConfig(config(*key.AccessKey.AccessKeyId, *key.AccessKey.SecretAccessKey), path)
	if _, err := user.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket, Delimiter: aws.String("/")}); err != nil {
		t.Errorf("the bucket's listing with a delimiter, as aws s3 ls sends it: %v", err)
	}
	const name = "dir/a b+c=d&é~(1).txt"
	if _, err := user.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String(name), Body: strings.NewReader("hi")}); err != nil {
		t.Fatalf("put %q: %v", name, err)
	}
	list, err := user.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket, Prefix: aws.String("dir/a b+c=d&é"), Delimiter: aws.String("/")})
	if err != nil {
		t.Fatalf("list the prefix of %q: %v", name, err)
	}
	if len(list.Contents) != 1 || aws.ToString(list.Contents[0].Key) != name {
		t.Errorf("listing the prefix of %q found %+v", name, list.Contents)
	}
	got, err := user.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(name)})
	if err != nil {
		t.Fatalf("get %q: %v", name, err)
	}
	body, err := io.ReadAll(got.Body)
	got.Body.Close()
	if err != nil || string(body) != "hi" {
		t.Errorf("get %q: %q %v, want what was put", name, body, err)
	}

	// Enforcement still holds: the test keys are refused, for want of a user.
	if _, err := s3.NewFromConfig(admin, path).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket}); err == nil {
		t.Error("moto let the test keys list the bucket: is IAM enforced?")
	}
}

// enforceIAM turns moto's IAM enforcement on, as the sandbox does.
func enforceIAM(ctx context.Context, t *testing.T, endpoint string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/moto-api/reset-auth", strings.NewReader("0"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("turn on IAM enforcement: HTTP %d", resp.StatusCode)
	}
}
