// Package cfnregistry holds what CloudFormation's resource type registry
// says about the resource types the broker's templates create (schemas/:
// per type, the IAM actions each handler needs and the properties whose
// change replaces the resource), kept as data with its source, and checks
// a role's policy against templates: which actions a template's resources
// need that the policy does not grant. The infra tests prove the service
// role complete with it; make build reports on a user's catalog with it.
package cfnregistry

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
)

//go:embed schemas/*.json
var schemaFiles embed.FS

// StackHandlers are the handlers CloudFormation calls during stack
// operations. The registry's list handler serves Cloud Control's
// ListResources and the IaC generator, never a stack, so a stack's role
// needs none of its actions.
var StackHandlers = []string{"create", "read", "update", "delete"}

// CustomResource is the schema of every custom resource type (Custom::NAME,
// AWS::CloudFormation::CustomResource): the registry has none, and
// CloudFormation's one call for each is to invoke the function its
// ServiceToken names, with the stack's credentials (its service role's
// when it has one), on create, update and delete (the CloudFormation
// User Guide, "Lambda-backed custom resources"). An SNS ServiceToken
// would need sns:Publish instead; the broker's templates name functions.
var CustomResource = Schema{
	TypeName: "AWS::CloudFormation::CustomResource",
	Source:   "the CloudFormation User Guide, Lambda-backed custom resources: the stack's role invokes the ServiceToken's function",
	Handlers: map[string]Handler{
		"create": {Permissions: []string{"lambda:InvokeFunction"}},
		"update": {Permissions: []string{"lambda:InvokeFunction"}},
		"delete": {Permissions: []string{"lambda:InvokeFunction"}},
	},
}

// IsCustom says whether typ is a custom resource type.
func IsCustom(typ string) bool {
	return strings.HasPrefix(typ, "Custom::") || typ == CustomResource.TypeName
}

// schemaOf is typ's schema among schemas, CustomResource for a custom
// type.
func schemaOf(schemas map[string]Schema, typ string) (Schema, bool) {
	if IsCustom(typ) {
		return CustomResource, true
	}
	s, ok := schemas[typ]
	return s, ok
}

// Schema is what the broker keeps of one resource type's registry schema.
type Schema struct {
	TypeName string             `json:"typeName"`
	Handlers map[string]Handler `json:"handlers"`
	// CreateOnlyProperties are JSON pointers (/properties/Name): changing
	// one replaces the resource.
	CreateOnlyProperties []string `json:"createOnlyProperties"`
	// Source, for a type written by hand (handwritten.json), says where
	// its actions come from.
	Source string `json:"source,omitempty"`
	// Properties are the type's properties, by name, and Definitions the
	// shapes they refer to ($ref "#/definitions/NAME").
	Properties  map[string]Property `json:"properties"`
	Definitions map[string]Property `json:"definitions"`
	// Immutable and Conditional are the top-level properties that
	// CloudFormation's resource specification marks "UpdateType":
	// "Immutable" (a change replaces the resource; the registry schema does
	// not always list them as create-only: DynamoDB's KeySchema) or
	// "Conditional" (a change may replace it), from update-behaviour.json.
	// The specification's Conditional also covers "Some interruptions"
	// (an RDS instance's EngineVersion: updated in place, with a restart),
	// so Conditional keeps only what the CloudFormation User Guide says
	// may be replaced; ConditionalSource says where that was read.
	Immutable         []string `json:"immutable,omitempty"`
	Conditional       []string `json:"conditional,omitempty"`
	ConditionalSource string   `json:"conditional_source,omitempty"`
}

// Property is what the broker keeps of a property's JSON schema: where its
// own properties are, directly, in a definition, in its items (a list of
// objects) or in its alternatives.
type Property struct {
	Ref        string              `json:"$ref"`
	Properties map[string]Property `json:"properties"`
	Items      *Property           `json:"items"`
	OneOf      []Property          `json:"oneOf"`
	AnyOf      []Property          `json:"anyOf"`
}

// HasProperty says whether the type has the property at path: a top-level
// property's name, or a nested one's path from it, its names joined by "/"
// (StreamSpecification/ResourcePolicy), lists' items taken as the list.
func (s Schema) HasProperty(path string) bool {
	names := strings.Split(path, "/")
	level := []Property{{Properties: s.Properties}}
	for _, name := range names {
		var next []Property
		for _, p := range level {
			for _, shape := range s.shapes(p, 0) {
				if child, ok := shape.Properties[name]; ok {
					next = append(next, child)
				}
			}
		}
		if len(next) == 0 {
			return false
		}
		level = next
	}
	return true
}

// maxDepth bounds how many references shapes follows: a definition may
// refer to itself.
const maxDepth = 8

// shapes are the schemas that may hold p's properties: p itself, what its
// $ref names, its items and its alternatives, each resolved in turn.
func (s Schema) shapes(p Property, depth int) []Property {
	if depth > maxDepth {
		return nil
	}
	out := []Property{p}
	if name, ok := strings.CutPrefix(p.Ref, "#/definitions/"); ok {
		if d, ok := s.Definitions[name]; ok {
			out = append(out, s.shapes(d, depth+1)...)
		}
	}
	if p.Items != nil {
		out = append(out, s.shapes(*p.Items, depth+1)...)
	}
	for _, alt := range append(slices.Clone(p.OneOf), p.AnyOf...) {
		out = append(out, s.shapes(alt, depth+1)...)
	}
	return out
}

// Handler is one handler of a type.
type Handler struct {
	Permissions      []string `json:"permissions"`
	TimeoutInMinutes int      `json:"timeoutInMinutes,omitempty"`
}

// Actions are the actions of handler h, or none.
func (s Schema) Actions(h string) []string { return s.Handlers[h].Permissions }

// ReplacedBy says whether setting or changing the top-level property
// replaces the resource.
func (s Schema) ReplacedBy(property string) bool {
	return s.UpdateOf(property) == UpdateReplaces
}

// Update is what changing a property does to its resource.
type Update int

const (
	// UpdateInPlace: the resource is updated (or the type says nothing).
	UpdateInPlace Update = iota
	// UpdateMayReplace: the resource specification's "Conditional": it
	// may be replaced, depending on the values (CloudFormation decides as
	// it runs).
	UpdateMayReplace
	// UpdateReplaces: a create-only property (the registry) or an
	// "Immutable" one (the resource specification): a new resource.
	UpdateReplaces
)

// UpdateOf says what changing the property at path does: a top-level
// property's name, or a nested one's path from it, names joined by "/"
// (KeySchema, Foo/Bar), as the registry's createOnlyProperties name them
// without "/properties/".
func (s Schema) UpdateOf(path string) Update {
	top, _, _ := strings.Cut(path, "/")
	if slices.Contains(s.CreateOnlyProperties, "/properties/"+path) || slices.Contains(s.Immutable, top) {
		return UpdateReplaces
	}
	if slices.Contains(s.Conditional, top) {
		return UpdateMayReplace
	}
	return UpdateInPlace
}

// ReplacingPaths are the paths (as UpdateOf takes them) whose change may
// replace the resource, sorted: the create-only properties, the immutable
// and the conditional ones.
func (s Schema) ReplacingPaths() []string {
	var out []string
	for _, p := range s.CreateOnlyProperties {
		if path, ok := strings.CutPrefix(p, "/properties/"); ok {
			out = append(out, path)
		}
	}
	out = append(append(out, s.Immutable...), s.Conditional...)
	slices.Sort(out)
	return slices.Compact(out)
}

var loaded = sync.OnceValues(load)

// Schemas are the kept schemas, by type name: the registry's, with the
// handlers of handwritten.json for the types whose registry schema has none.
func Schemas() (map[string]Schema, error) { return loaded() }

func load() (map[string]Schema, error) {
	out := map[string]Schema{}
	names, err := fs.Glob(schemaFiles, "schemas/*.json")
	if err != nil {
		return nil, err
	}
	var handwritten, behaviour []Schema
	for _, name := range names {
		text, err := schemaFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		if path.Base(name) == "handwritten.json" {
			if err := json.Unmarshal(text, &handwritten); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			continue
		}
		if path.Base(name) == "update-behaviour.json" {
			if err := json.Unmarshal(text, &behaviour); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			continue
		}
		var s Schema
		if err := json.Unmarshal(text, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if want := FileName(s.TypeName); path.Base(name) != want {
			return nil, fmt.Errorf("%s holds %s, whose file is %s", name, s.TypeName, want)
		}
		out[s.TypeName] = s
	}
	for _, h := range handwritten {
		s, ok := out[h.TypeName]
		switch {
		case !ok:
			return nil, fmt.Errorf("handwritten.json: %s has no registry schema here", h.TypeName)
		case len(s.Handlers) > 0:
			return nil, fmt.Errorf("handwritten.json: %s's registry schema has handlers: use them", h.TypeName)
		case h.Source == "":
			return nil, fmt.Errorf("handwritten.json: %s says not where its actions come from", h.TypeName)
		}
		s.Handlers, s.Source = h.Handlers, h.Source
		out[h.TypeName] = s
	}
	for _, b := range behaviour {
		s, ok := out[b.TypeName]
		switch {
		case !ok:
			return nil, fmt.Errorf("update-behaviour.json: %s has no registry schema here", b.TypeName)
		case b.Source == "":
			return nil, fmt.Errorf("update-behaviour.json: %s says not where its update behaviour comes from", b.TypeName)
		case len(b.Conditional) > 0 && b.ConditionalSource == "":
			return nil, fmt.Errorf("update-behaviour.json: %s lists conditional properties without saying where the User Guide says they may replace (conditional_source)", b.TypeName)
		}
		for _, p := range append(slices.Clone(b.Immutable), b.Conditional...) {
			if _, ok := s.Properties[p]; !ok {
				return nil, fmt.Errorf("update-behaviour.json: %s has no property %s", b.TypeName, p)
			}
		}
		s.Immutable, s.Conditional = b.Immutable, b.Conditional
		out[b.TypeName] = s
	}
	return out, nil
}

// FileName is the file of type name's schema: aws-s3-bucket.json for
// AWS::S3::Bucket, as the registry's schema files are named.
func FileName(typeName string) string {
	return strings.ToLower(strings.ReplaceAll(typeName, "::", "-")) + ".json"
}

// TypeNames are the kept types, sorted.
func TypeNames() []string {
	s, err := Schemas()
	if err != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s))
}
