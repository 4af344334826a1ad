package dbusers

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/serverless-osb/broker/internal/cfnresource"
	"github.com/serverless-osb/broker/internal/deploy"
)

// ResourceType is the custom resource's type in the binding templates.
const ResourceType = deploy.DatabaseUser

// The attributes a template reads with Fn::GetAtt.
const (
	AttributeUsername = "Username"
	AttributePassword = "Password"
	AttributeURI      = "Uri"
)

// Properties are the custom resource's properties (CloudFormation passes
// every value as a string).
type Properties struct {
	// Engine is postgres or mysql (MariaDB included).
	Engine string
	Host   string
	Port   string
	// Database is the application's database.
	Database string
	// Schema is the application's schema (PostgreSQL; default app).
	Schema string
	// MasterSecretArn is the instance's master secret (RDS's), JSON with
	// username and password.
	MasterSecretArn string
	// SecretArn is the binding's own secret, whose password the stack
	// generated; the handler adds the user's name and the connection.
	SecretArn  string
	Privileges Privileges
	OnDelete   OnDelete
}

// SecretsAPI is the part of Secrets Manager the handler calls.
type SecretsAPI interface {
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
	PutSecretValue(context.Context, *secretsmanager.PutSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error)
}

// Handler answers CloudFormation's requests for Custom::DatabaseUser.
type Handler struct {
	Secrets SecretsAPI
	// TLS is how the handler reaches databases (VerifyingTLS); nil only in
	// tests on loopback.
	TLS *tls.Config
	// Unavailable, when set, is why the handler reaches no database
	// (ErrNoBundle): every request that would connect fails with it.
	Unavailable error
	Log         *slog.Logger
}

// Open connects to the database p names, as its master.
func (h *Handler) Open(ctx context.Context, p Properties, master Conn) (Engine, error) {
	switch p.Engine {
	case "postgres":
		schema := p.Schema
		if schema == "" {
			schema = "app"
		}
		return OpenPostgres(ctx, master, schema)
	case "mysql":
		return OpenMySQL(ctx, master)
	}
	return nil, fmt.Errorf("engine %q: want postgres or mysql", p.Engine)
}

// Handle runs one request; it returns the user's name as the physical id
// (a failed create too, so that the rollback's delete finds what it made)
// and, on create and update, the user's credentials as the resource's
// attributes.
func (h *Handler) Handle(ctx context.Context, e cfn.Event) (string, map[string]any, error) {
	// A create that failed before it named a user (CloudFormation then
	// holds another id) made nothing to delete, whatever its properties.
	if e.RequestType == cfn.RequestDelete && CheckName(e.PhysicalResourceID) != nil {
		return e.PhysicalResourceID, nil, nil
	}
	// Nor did a create the handler could not try: no user name, so that
	// the rollback's delete is the no-op above.
	if e.RequestType == cfn.RequestCreate && h.Unavailable != nil {
		return "", nil, h.Unavailable
	}
	p, err := ParseProperties(e.ResourceProperties)
	if err != nil {
		return e.PhysicalResourceID, nil, err
	}
	switch e.RequestType {
	case cfn.RequestCreate, cfn.RequestUpdate:
		name := e.PhysicalResourceID
		if e.RequestType == cfn.RequestCreate {
			name = UserName(e.StackID, e.LogicalResourceID)
		} else if old, err := ParseProperties(e.OldResourceProperties); err == nil && target(old) != target(p) {
			return name, nil, fmt.Errorf("a binding's user cannot move to another database (%s to %s): bind again", target(old), target(p))
		}
		data, err := h.create(ctx, name, p)
		return name, data, err
	case cfn.RequestDelete:
		return e.PhysicalResourceID, nil, h.delete(ctx, e.PhysicalResourceID, p)
	}
	return e.PhysicalResourceID, nil, fmt.Errorf("request type %q: want Create, Update or Delete", e.RequestType)
}

func target(p Properties) string {
	return p.Engine + "://" + net.JoinHostPort(p.Host, p.Port) + "/" + p.Database
}

// bindingSecret is the binding's secret's JSON, in the shape of RDS's
// secrets.
type bindingSecret struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password"`
	Engine   string `json:"engine,omitempty"`
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
	DBName   string `json:"dbname,omitempty"`
}

func (h *Handler) create(ctx context.Context, name string, p Properties) (map[string]any, error) {
	master, err := h.master(ctx, p)
	if err != nil {
		return nil, err
	}
	var s bindingSecret
	if err := h.readSecret(ctx, p.SecretArn, &s); err != nil {
		return nil, fmt.Errorf("read the binding's secret: %w", err)
	}
	if s.Password == "" {
		return nil, errors.New("the binding's secret holds no password")
	}
	engine, err := h.Open(ctx, p, master)
	if err != nil {
		return nil, err
	}
	defer engine.Close()
	if err := engine.Create(ctx, User{Name: name, Password: Password(s.Password), Privileges: p.Privileges}); err != nil {
		return nil, err
	}
	want := bindingSecret{Username: name, Password: s.Password, Engine: p.Engine, Host: p.Host, Port: master.Port, DBName: p.Database}
	if s != want {
		body, _ := json.Marshal(want)
		if _, err := h.Secrets.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
			SecretId: aws.String(p.SecretArn), SecretString: aws.String(string(body)),
		}); err != nil {
			return nil, fmt.Errorf("write the user's name into the binding's secret: %w", err)
		}
	}
	h.log().InfoContext(ctx, "database user made", "user", name, "engine", p.Engine, "privileges", string(p.Privileges))
	scheme := "postgresql"
	if p.Engine == "mysql" {
		scheme = "mysql"
	}
	uri := url.URL{Scheme: scheme, User: url.UserPassword(name, s.Password),
		Host: net.JoinHostPort(p.Host, p.Port), Path: "/" + p.Database}
	return map[string]any{AttributeUsername: name, AttributePassword: s.Password, AttributeURI: uri.String()}, nil
}

func (h *Handler) delete(ctx context.Context, name string, p Properties) error {
	master, err := h.master(ctx, p)
	var missing *smtypes.ResourceNotFoundException
	if errors.As(err, &missing) {
		// The database went with its secret: so did its users.
		h.log().InfoContext(ctx, "database user gone with its database", "user", name)
		return nil
	}
	if err != nil {
		return err
	}
	engine, err := h.Open(ctx, p, master)
	if err != nil {
		return err
	}
	defer engine.Close()
	if err := engine.Delete(ctx, name, p.OnDelete); err != nil {
		return err
	}
	h.log().InfoContext(ctx, "database user dropped", "user", name, "on_delete", string(p.OnDelete))
	return nil
}

// master reads the master's credentials.
func (h *Handler) master(ctx context.Context, p Properties) (Conn, error) {
	if h.Unavailable != nil {
		return Conn{}, h.Unavailable
	}
	var s bindingSecret
	if err := h.readSecret(ctx, p.MasterSecretArn, &s); err != nil {
		return Conn{}, fmt.Errorf("read the master secret: %w", err)
	}
	port, err := strconv.Atoi(p.Port)
	if err != nil || port < 1 || port > 65535 {
		return Conn{}, fmt.Errorf("port %q: want a number from 1 to 65535", p.Port)
	}
	c := Conn{Host: p.Host, Port: port, Database: p.Database, User: s.Username, Password: Password(s.Password)}
	if h.TLS != nil {
		c.TLS = h.TLS.Clone()
		c.TLS.ServerName = p.Host
	}
	return c, nil
}

func (h *Handler) readSecret(ctx context.Context, arn string, into *bindingSecret) error {
	return cfnresource.ReadSecret(ctx, h.Secrets, arn, into)
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// ParseProperties decodes and checks the custom resource's properties.
func ParseProperties(raw map[string]any) (Properties, error) {
	str := func(k string) string { s, _ := raw[k].(string); return s }
	p := Properties{
		Engine: str("Engine"), Host: str("Host"), Port: str("Port"), Database: str("Database"), Schema: str("Schema"),
		MasterSecretArn: str("MasterSecretArn"), SecretArn: str("SecretArn"),
		Privileges: Privileges(str("Privileges")), OnDelete: OnDelete(str("OnDelete")),
	}
	if p.Privileges == "" {
		p.Privileges = ReadWrite
	}
	if p.OnDelete == "" {
		p.OnDelete = Drop
	}
	for k, v := range map[string]string{"Engine": p.Engine, "Host": p.Host, "Port": p.Port, "Database": p.Database,
		"MasterSecretArn": p.MasterSecretArn, "SecretArn": p.SecretArn} {
		if v == "" {
			return p, fmt.Errorf("the property %s is missing", k)
		}
	}
	if err := CheckMode(p.OnDelete); err != nil {
		return p, err
	}
	if p.Engine != "postgres" && p.Engine != "mysql" {
		return p, fmt.Errorf("engine %q: want postgres or mysql", p.Engine)
	}
	switch p.Privileges {
	case Owner, ReadWrite, ReadOnly:
	default:
		return p, fmt.Errorf("privileges %q: want owner, readwrite or readonly", p.Privileges)
	}
	return p, nil
}

// Respond runs Handle and sends its answer to CloudFormation's URL: the
// Lambda function's handler. The reason sent and logged is the error's,
// which names no password.
func (h *Handler) Respond(ctx context.Context, e cfn.Event) error {
	return cfnresource.Respond(ctx, e, h.log(), "database user", h.Handle)
}
