package cloudformation

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/jsonenc"
)

var _ broker.Versioned = (*Settings)(nil)

// PlanDigest identifies what the plan deploys: its templates, as written,
// and the parameters it fixes. Anything else of its settings (retry_after,
// the schemas) changes no stack, so it may change under the same version.
func (s *Settings) PlanDigest() string {
	if s.digest == nil { // settings made by hand, not by Configure
		return planDigest(s)
	}
	s.digest.once.Do(func() { s.digest.value = planDigest(s) })
	return s.digest.value
}

// lazyDigest is a plan's digest, computed once: Configure leaves it to the
// first PlanDigest, after which nothing changes the settings it is of.
type lazyDigest struct {
	once  sync.Once
	value string
}

func planDigest(s *Settings) string {
	v := struct {
		Template          string            `json:"template"`
		BindingTemplate   string            `json:"binding_template,omitempty"`
		Parameters        map[string]string `json:"parameters,omitempty"`
		BindingParameters map[string]string `json:"binding_parameters,omitempty"`
		AllowReplacement  []string          `json:"allow_replacement,omitempty"`
		// The trust anchor a role plan's bindings trust is what its
		// binding stacks are made with, as a fixed parameter is.
		TrustAnchorARN string `json:"trust_anchor_arn,omitempty"`
		// A placed plan's networks by place fix its stacks' network
		// parameters as Parameters do, each in its place.
		PlaceNetworks map[string]map[string]string `json:"place_networks,omitempty"`
	}{Template: s.Template.Body, Parameters: s.Parameters, BindingParameters: s.BindingParameters,
		AllowReplacement: s.AllowReplacement, TrustAnchorARN: s.TrustAnchorARN}
	if len(s.PlaceNetworks) > 1 {
		v.PlaceNetworks = map[string]map[string]string{}
		for k, n := range s.PlaceNetworks {
			v.PlaceNetworks[k] = networkValues(n)
		}
	}
	if s.BindingTemplate != nil {
		v.BindingTemplate = s.BindingTemplate.Body
	}
	// Map keys sorted: the same settings give the same digest. Strings
	// and maps of strings always marshal.
	b, _ := jsonenc.Marshal(v)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
