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
