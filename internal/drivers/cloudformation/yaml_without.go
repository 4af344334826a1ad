//go:build osb_without_yaml

package cloudformation

import "errors"

// yamlTemplate refuses: this bootstrap reads templates pre-parsed only.
// make build builds the api's bootstrap with the tag osb_without_yaml when
// it bundles every template pre-parsed (Preparse), which leaves yaml.v3
// out of it.
func yamlTemplate([]byte) (map[string]any, []string, error) {
	return nil, nil, errors.New("not read: this bootstrap reads templates pre-parsed only (<template>.json beside each, made from it by make build; build tag osb_without_yaml), and there is none made from this YAML: build the bundles from this catalog with make build")
}

// liveYAMLTemplate reads the YAML template a stack runs, which
// CloudFormation gives back as it was written, with the subset reader:
// make build leaves yaml.v3 out of the worker only when it reads every
// template of the catalog as yaml.v3 does (ReadsWithoutYAML).
func liveYAMLTemplate(body []byte) (map[string]any, []string, error) { return subsetTemplate(body) }

// yamlDocument reads a YAML template's document with its short-form tags
// as their long forms (templateDocument), with the subset reader.
func yamlDocument(body []byte) (map[string]any, error) { return subsetDocument(body) }
