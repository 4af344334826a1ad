package app_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// motoAPI calls an AWS API on moto that the module has no SDK client for
// (SNS, Kinesis), signed as the SDK would sign it: moto routes a request
// to its service by the signature's scope.
type motoAPI struct {
	cfg aws.Config
}

// call sends body to moto as service's API and returns the answer's body,
// or an error holding it when the status is not 200.
func (m motoAPI) call(ctx context.Context, service, contentType, target string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, aws.ToString(m.cfg.BaseEndpoint)+"/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	creds, err := m.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), service, m.cfg.Region, time.Now()); err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %d %s", service, target, resp.StatusCode, out)
	}
	return out, nil
}

// topicExists asks moto's SNS for the topic's attributes.
func (m motoAPI) topicExists(ctx context.Context, arn string) (bool, error) {
	form := url.Values{"Action": {"GetTopicAttributes"}, "Version": {"2010-03-31"}, "TopicArn": {arn}}
	_, err := m.call(ctx, "sns", "application/x-www-form-urlencoded", "", []byte(form.Encode()))
	return notFound(err)
}

// streamShards asks moto's Kinesis for the stream's open shards; a stream
// that does not exist has none and exists false.
func (m motoAPI) streamShards(ctx context.Context, name string) (shards int, exists bool, err error) {
	body, _ := json.Marshal(map[string]string{"StreamName": name})
	out, err := m.call(ctx, "kinesis", "application/x-amz-json-1.1", "Kinesis_20131202.DescribeStreamSummary", body)
	if exists, err = notFound(err); !exists || err != nil {
		return 0, exists, err
	}
	var summary struct {
		StreamDescriptionSummary struct {
			OpenShardCount int
		}
	}
	if err := json.Unmarshal(out, &summary); err != nil {
		return 0, true, err
	}
	return summary.StreamDescriptionSummary.OpenShardCount, true, nil
}

// queueExists says whether the queue at the URL exists in moto.
func queueExists(ctx context.Context, c *sqs.Client, queueURL string) (bool, error) {
	if !strings.HasPrefix(queueURL, "http") {
		return false, fmt.Errorf("%q is not a queue URL", queueURL)
	}
	_, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL)})
	return notFound(err)
}

// databaseExists asks moto's RDS for the DB instance whose endpoint is
// host (moto's host names start with the instance's identifier), and says
// whether the master secret whose ARN the binding hands out exists with
// it: a database without its secret, or a secret that outlived its
// database, is an error.
func (m motoAPI) databaseExists(ctx context.Context, host, secretARN string) (bool, error) {
	id, _, _ := strings.Cut(host, ".")
	form := url.Values{"Action": {"DescribeDBInstances"}, "Version": {"2014-10-31"}, "DBInstanceIdentifier": {id}}
	_, err := m.call(ctx, "rds", "application/x-www-form-urlencoded", "", []byte(form.Encode()))
	db, err := notFound(err)
	if err != nil {
		return false, err
	}
	_, err = secretsmanager.NewFromConfig(m.cfg).DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(secretARN)})
	secret, err := notFound(err)
	if err != nil {
		return false, err
	}
	if db != secret {
		return false, fmt.Errorf("the database %s exists: %v, its master secret %s: %v", id, db, secretARN, secret)
	}
	return db, nil
}
