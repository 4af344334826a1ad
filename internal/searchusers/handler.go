package searchusers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/serverless-osb/broker/internal/dbusers"

	"github.com/serverless-osb/broker/internal/cfnresource"
)

// Properties are the custom resource's properties for Engine opensearch
// (CloudFormation passes every value as a string).
type Properties struct {
	// Host and Port are the domain's endpoint (443).
	Host string
	Port string
	// MasterSecretArn is the instance's master secret, JSON with username
	// and password.
	MasterSecretArn string
	// SecretArn is the binding's own secret, whose password the stack
	// generated; the handler adds the user's name and the endpoint.
	SecretArn  string
	Privileges Privileges
	// IndexPattern is what readwrite and readonly users reach (default
	// DefaultIndexPattern).
	IndexPattern string
}

// Is says whether a Custom::DatabaseUser request is this package's: its
// Engine is opensearch (the old properties' for a delete or an update that
// left it).
func Is(e cfn.Event) bool {
	engine := func(props map[string]any) string { s, _ := props["Engine"].(string); return s }
	return engine(e.ResourceProperties) == Engine || (engine(e.ResourceProperties) == "" && engine(e.OldResourceProperties) == Engine)
}

// ParseProperties decodes and checks the custom resource's properties.
func ParseProperties(raw map[string]any) (Properties, error) {
	str := func(k string) string { s, _ := raw[k].(string); return s }
	p := Properties{Host: str("Host"), Port: str("Port"), MasterSecretArn: str("MasterSecretArn"), SecretArn: str("SecretArn"),
		Privileges: Privileges(str("Privileges")), IndexPattern: str("IndexPattern")}
	if e := str("Engine"); e != Engine {
		return p, fmt.Errorf("engine %q: want %s", e, Engine)
	}
	if p.Privileges == "" {
		p.Privileges = dbusers.ReadWrite
	}
	if p.IndexPattern == "" {
		p.IndexPattern = DefaultIndexPattern
	}
	for _, k := range []struct{ name, value string }{{"Host", p.Host}, {"Port", p.Port},
		{"MasterSecretArn", p.MasterSecretArn}, {"SecretArn", p.SecretArn}} {
		if k.value == "" {
			return p, fmt.Errorf("the property %s is missing", k.name)
		}
	}
	if port, err := strconv.Atoi(p.Port); err != nil || port < 1 || port > 65535 {
		return p, fmt.Errorf("port %q: want a number from 1 to 65535", p.Port)
	}
	// The host becomes the URL's: nothing but a host name or an address.
	if strings.ContainsAny(p.Host, "/@:?#[] ") {
		return p, fmt.Errorf("host %q: want a host name", p.Host)
	}
	if err := CheckIndexPattern(p.IndexPattern); err != nil {
		return p, err
	}
	switch p.Privileges {
	case dbusers.Owner, dbusers.ReadWrite, dbusers.ReadOnly:
	default:
		return p, fmt.Errorf("privileges %q: want owner, readwrite or readonly", p.Privileges)
	}
	return p, nil
}

// Handler answers CloudFormation's Custom::DatabaseUser requests whose
// Engine is opensearch.
type Handler struct {
	Secrets dbusers.SecretsAPI
	// HTTP reaches the domains; it verifies their certificates (the
	// default client does, with the system's roots).
	HTTP *http.Client
	Log  *slog.Logger
}

// Handle runs one request; it returns the user's name as the physical id
// (a failed create too, so that the rollback's delete finds what it made)
// and, on create and update, the user's credentials as the resource's
// attributes.
func (h *Handler) Handle(ctx context.Context, e cfn.Event) (string, map[string]any, error) {
	// A create that failed before it named a user made nothing to delete.
	if e.RequestType == cfn.RequestDelete && dbusers.CheckName(e.PhysicalResourceID) != nil {
		return e.PhysicalResourceID, nil, nil
	}
	p, err := ParseProperties(e.ResourceProperties)
	if err != nil {
		return e.PhysicalResourceID, nil, err
	}
	switch e.RequestType {
	case cfn.RequestCreate, cfn.RequestUpdate:
		name := e.PhysicalResourceID
		if e.RequestType == cfn.RequestCreate {
			name = dbusers.UserName(e.StackID, e.LogicalResourceID)
		} else if old, err := ParseProperties(e.OldResourceProperties); err == nil && old.Host != p.Host {
			return name, nil, fmt.Errorf("a binding's user cannot move to another domain (%s to %s): bind again", old.Host, p.Host)
		}
		data, err := h.create(ctx, name, p)
		return name, data, err
	case cfn.RequestDelete:
		return e.PhysicalResourceID, nil, h.delete(ctx, e.PhysicalResourceID, p)
	}
	return e.PhysicalResourceID, nil, fmt.Errorf("request type %q: want Create, Update or Delete", e.RequestType)
}

// bindingSecret is the binding's secret's JSON.
type bindingSecret struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password"`
	Engine   string `json:"engine,omitempty"`
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
}

func (h *Handler) create(ctx context.Context, name string, p Properties) (map[string]any, error) {
	api, err := h.api(ctx, p)
	if err != nil {
		return nil, err
	}
	var s bindingSecret
	if err := h.readSecret(ctx, p.SecretArn, &s); err != nil {
		return nil, fmt.Errorf("read the binding's secret: %w", err)
	}
	if err := checkPassword(s.Password); err != nil {
		return nil, err
	}
	role, err := RoleFor(name, p.Privileges, p.IndexPattern)
	if err != nil {
		return nil, err
	}
	// The role first, the mapping last: the user has no privilege until
	// all three exist, and each PUT replaces what a request sent before
	// made.
	if err := api.put(ctx, "roles", name, role); err != nil {
		return nil, err
	}
	if err := api.put(ctx, "internalusers", name, internalUser{Password: s.Password, Description: role.Description}); err != nil {
		return nil, err
	}
	if err := api.put(ctx, "rolesmapping", name, roleMapping{Users: []string{name}}); err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(p.Port)
	want := bindingSecret{Username: name, Password: s.Password, Engine: Engine, Host: p.Host, Port: port}
	if s != want {
		body, _ := json.Marshal(want)
		if _, err := h.Secrets.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
			SecretId: aws.String(p.SecretArn), SecretString: aws.String(string(body)),
		}); err != nil {
			return nil, fmt.Errorf("write the user's name into the binding's secret: %w", err)
		}
	}
	h.log().InfoContext(ctx, "search user made", "user", name, "engine", Engine, "privileges", string(p.Privileges))
	uri := url.URL{Scheme: "https", User: url.UserPassword(name, s.Password), Host: net.JoinHostPort(p.Host, p.Port)}
	return map[string]any{dbusers.AttributeUsername: name, dbusers.AttributePassword: s.Password, dbusers.AttributeURI: uri.String(),
		AttributeIndexPattern: Reaches(name, p.Privileges, p.IndexPattern)}, nil
}

func (h *Handler) delete(ctx context.Context, name string, p Properties) error {
	api, err := h.api(ctx, p)
	var missing *smtypes.ResourceNotFoundException
	if errors.As(err, &missing) {
		// The domain's secret is kept with the domain: gone, the
		// operator deleted both, and the users with them.
		h.log().InfoContext(ctx, "search user gone with its domain", "user", name)
		return nil
	}
	if err != nil {
		return err
	}
	// The mapping first: from then on the user can do nothing.
	for _, kind := range []string{"rolesmapping", "internalusers", "roles"} {
		if err := api.delete(ctx, kind, name); err != nil {
			return err
		}
	}
	h.log().InfoContext(ctx, "search user deleted", "user", name)
	return nil
}

// internalUser is the body of PUT _plugins/_security/api/internalusers/<name>.
type internalUser struct {
	Password    string `json:"password"`
	Description string `json:"description,omitempty"`
}

// roleMapping is the body of PUT _plugins/_security/api/rolesmapping/<role>.
type roleMapping struct {
	Users []string `json:"users"`
}

// securityAPI is the security plugin's REST API of one domain, as its
// master user.
type securityAPI struct {
	client         *http.Client
	base           string
	user, password string
}

func (h *Handler) api(ctx context.Context, p Properties) (*securityAPI, error) {
	var master bindingSecret
	if err := h.readSecret(ctx, p.MasterSecretArn, &master); err != nil {
		return nil, fmt.Errorf("read the master secret: %w", err)
	}
	if master.Username == "" || master.Password == "" {
		return nil, errors.New("the master secret holds no username or password")
	}
	client := h.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	return &securityAPI{client: client, base: "https://" + net.JoinHostPort(p.Host, p.Port) + "/_plugins/_security/api/",
		user: master.Username, password: master.Password}, nil
}

func (a *securityAPI) put(ctx context.Context, kind, name string, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	status, msg, err := a.do(ctx, http.MethodPut, kind, name, data)
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusCreated {
		return fmt.Errorf("PUT %s/%s: HTTP %d: %s", kind, name, status, msg)
	}
	return nil
}

// delete deletes name; one already gone is no error.
func (a *securityAPI) delete(ctx context.Context, kind, name string) error {
	status, msg, err := a.do(ctx, http.MethodDelete, kind, name, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusNotFound {
		return fmt.Errorf("DELETE %s/%s: HTTP %d: %s", kind, name, status, msg)
	}
	return nil
}

// do sends one request and returns its status and the plugin's message
// (its answers are {"status": …, "message": …}; the request's body, which
// may hold a password, is never part of an error).
func (a *securityAPI) do(ctx context.Context, method, kind, name string, body []byte) (int, string, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+kind+"/"+url.PathEscape(name), r)
	if err != nil {
		return 0, "", err
	}
	req.SetBasicAuth(a.user, a.password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%s %s/%s: %w", method, kind, name, err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var answer struct{ Status, Message, Reason string }
	msg := strings.TrimSpace(string(text))
	if json.Unmarshal(text, &answer) == nil && (answer.Message != "" || answer.Reason != "") {
		msg = strings.TrimSpace(answer.Message + " " + answer.Reason)
	}
	return resp.StatusCode, msg, nil
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

// Respond runs Handle and sends its answer to CloudFormation's URL. The
// reason sent and logged is the error's, which names no password.
func (h *Handler) Respond(ctx context.Context, e cfn.Event) error {
	return cfnresource.Respond(ctx, e, h.log(), "search user", h.Handle)
}
