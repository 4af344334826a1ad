package dbusers_test

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/serverless-osb/broker/internal/dbusers"
	"github.com/serverless-osb/broker/internal/mototest"
)

// handlerFixture is the handler on a real server, with its secrets in moto's
// Secrets Manager, and CloudFormation's answer URL a presigned PUT of moto's
// S3, as CloudFormation's is of S3.
type handlerFixture struct {
	*fixture
	sm      *secretsmanager.Client
	s3      *s3.Client
	bucket  string
	handler *dbusers.Handler
	props   map[string]any
}

func newHandlerFixture(t *testing.T, e engine) *handlerFixture {
	t.Helper()
	f := newFixture(t, e, e.start(t))
	cfg := mototest.Config(t, "eu-west-1")
	h := &handlerFixture{fixture: f, sm: secretsmanager.NewFromConfig(cfg),
		s3: s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }), bucket: mototest.Name("cfn-answers")}
	if _, err := h.s3.CreateBucket(f.ctx, &s3.CreateBucketInput{Bucket: aws.String(h.bucket),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraintEuWest1}}); err != nil {
		t.Fatal(err)
	}
	masterValue, _ := json.Marshal(map[string]string{"username": f.s.MasterUser, "password": f.s.MasterPassword})
	master := h.secret(mototest.Name("rds!db"), string(masterValue))
	engineName := "postgres"
	if e.name == "mariadb" {
		engineName = "mysql"
	}
	h.props = map[string]any{
		"ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:osb-dbuser-vpc-0123456789abcdef0",
		"Engine":       engineName, "Host": f.s.Host, "Port": itoa(f.s.Port), "Database": f.s.Database,
		"MasterSecretArn": master, "Privileges": "readwrite", "OnDelete": "drop",
	}
	h.handler = &dbusers.Handler{Secrets: h.sm}
	return h
}

func (h *handlerFixture) secret(name, value string) string {
	h.t.Helper()
	out, err := h.sm.CreateSecret(h.ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
	if err != nil {
		h.t.Fatal(err)
	}
	return aws.ToString(out.ARN)
}

// request sends one request through Respond and returns CloudFormation's
// answer, as S3 received it.
func (h *handlerFixture) request(kind cfn.RequestType, physicalID string, props map[string]any) cfn.Response {
	h.t.Helper()
	key := mototest.Name("answer")
	presigned, err := s3.NewPresignClient(h.s3).PresignPutObject(h.ctx, &s3.PutObjectInput{Bucket: aws.String(h.bucket), Key: aws.String(key)},
		s3.WithPresignExpires(time.Hour))
	if err != nil {
		h.t.Fatal(err)
	}
	e := cfn.Event{RequestType: kind, RequestID: mototest.Name("request"), ResponseURL: presigned.URL,
		ResourceType: dbusers.ResourceType, LogicalResourceID: "DatabaseUser", PhysicalResourceID: physicalID,
		StackID: "arn:aws:cloudformation:eu-west-1:123456789012:stack/osb-b1/" + h.t.Name(), ResourceProperties: props}
	if err := h.handler.Respond(h.ctx, e); err != nil {
		h.t.Fatal(err)
	}
	obj, err := h.s3.GetObject(h.ctx, &s3.GetObjectInput{Bucket: aws.String(h.bucket), Key: aws.String(key)})
	if err != nil {
		h.t.Fatal(err)
	}
	defer obj.Body.Close()
	body, _ := io.ReadAll(obj.Body)
	var r cfn.Response
	if err := json.Unmarshal(body, &r); err != nil {
		h.t.Fatalf("the answer %s: %v", body, err)
	}
	return r
}

func TestTheCustomResourceMakesAndDropsABindingsUser(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			h := newHandlerFixture(t, e)
			props := clone(h.props)
			props["SecretArn"] = h.secret(mototest.Name("osb-b1-db-user"), `{"password":"generated-by-secrets-manager"}`)

			created := h.request(cfn.RequestCreate, "", props)
			if created.Status != cfn.StatusSuccess {
				t.Fatalf("create: %s %s", created.Status, created.Reason)
			}
			name := created.PhysicalResourceID
			if err := dbusers.CheckName(name); err != nil {
				t.Fatalf("the physical id: %v", err)
			}
			if created.Data["Username"] != name || created.Data["Password"] != "generated-by-secrets-manager" ||
				!strings.Contains(created.Data["Uri"].(string), "://"+name+":generated-by-secrets-manager@") {
				t.Errorf("the attributes: %v", created.Data)
			}
			got, err := h.sm.GetSecretValue(h.ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(props["SecretArn"].(string))})
			if err != nil {
				t.Fatal(err)
			}
			var secret map[string]any
			_ = json.Unmarshal([]byte(aws.ToString(got.SecretString)), &secret)
			if secret["username"] != name || secret["password"] != "generated-by-secrets-manager" || secret["dbname"] != h.s.Database {
				t.Errorf("the binding's secret: %v", secret)
			}
			s, err := e.login(h.ctx, h.s, name, "generated-by-secrets-manager")
			if err != nil {
				t.Fatalf("the user cannot log in: %v", err)
			}
			s.close()

			again := h.request(cfn.RequestCreate, "", props)
			if again.Status != cfn.StatusSuccess || again.PhysicalResourceID != name {
				t.Errorf("a create sent again: %s %s %s", again.Status, again.PhysicalResourceID, again.Reason)
			}

			deleted := h.request(cfn.RequestDelete, name, props)
			if deleted.Status != cfn.StatusSuccess {
				t.Fatalf("delete: %s", deleted.Reason)
			}
			h.cannotLogIn(dbusers.User{Name: name, Password: "generated-by-secrets-manager"})
			if r := h.request(cfn.RequestDelete, name, props); r.Status != cfn.StatusSuccess {
				t.Errorf("a delete sent again: %s", r.Reason)
			}
		})
	}
}

func TestTheCustomResourceRefusesWhatItCannotDoClearly(t *testing.T) {
	e := engines[0]
	h := newHandlerFixture(t, e)
	props := clone(h.props)
	props["SecretArn"] = h.secret(mototest.Name("osb-b2-db-user"), `{"password":"pw"}`)
	props["Privileges"] = "admin"
	if r := h.request(cfn.RequestCreate, "", props); r.Status != cfn.StatusFailed || !strings.Contains(r.Reason, `privileges "admin"`) {
		t.Errorf("privileges admin: %s %q", r.Status, r.Reason)
	}
	t.Run("a delete after a create that named no user succeeds", func(t *testing.T) {
		bare := map[string]any{"ServiceToken": h.props["ServiceToken"]}
		if r := h.request(cfn.RequestDelete, "2026/11/28/[$LATEST]0123", bare); r.Status != cfn.StatusSuccess {
			t.Errorf("delete: %s %s", r.Status, r.Reason)
		}
	})
	t.Run("a delete whose database went with its master secret succeeds", func(t *testing.T) {
		gone := clone(h.props)
		gone["SecretArn"] = props["SecretArn"]
		gone["MasterSecretArn"] = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds!db-gone-AbCdEf"
		if r := h.request(cfn.RequestDelete, "osb_0123456789abcdef01234567", gone); r.Status != cfn.StatusSuccess {
			t.Errorf("delete: %s %s", r.Status, r.Reason)
		}
	})
	t.Run("an update to another database is refused", func(t *testing.T) {
		ok := clone(h.props)
		ok["SecretArn"] = props["SecretArn"]
		moved := clone(ok)
		moved["Database"] = "other"
		ev := cfn.Event{RequestType: cfn.RequestUpdate, PhysicalResourceID: "osb_0123456789abcdef01234567",
			ResourceProperties: moved, OldResourceProperties: ok}
		if _, _, err := h.handler.Handle(h.ctx, ev); err == nil || !strings.Contains(err.Error(), "bind again") {
			t.Errorf("update: %v", err)
		}
	})
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
