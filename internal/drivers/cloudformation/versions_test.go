package cloudformation

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestTheShippedPlansOfferEngineVersionsThatDoWhatThePlansSay holds the
// engine versions each shipped plan offers (its template's AllowedValues
// and Default, its create schema's enum, a version it fixes) to what AWS
// documents, read as files: none past the engine's end of standard support
// (RDS enrolls a new instance of such a version in RDS Extended Support, a
// charge per vCPU-hour the plan's costs do not show), only versions that
// pause at 0 ACUs on a plan whose MinCapacity is 0, and only versions the
// RDS Data API takes on a plan that turns it on.
func TestTheShippedPlansOfferEngineVersionsThatDoWhatThePlansSay(t *testing.T) {
	// Versions past the end of RDS standard support when this was checked
	// (2026-11), from AWS's release calendars: RDS for MySQL 8.0 ended
	// 2026-07-31, 5.7 2024-02-29; RDS for PostgreSQL 13 2026-02-28, 12
	// 2025-02-28, 11 2024-02-29; Aurora MySQL 2 2024-10-31; Aurora
	// PostgreSQL 13 2026-02-28, 12 2025-02-28, 11 2024-02-29. By major
	// version; a later check adds to it.
	pastStandardSupport := map[string][]string{
		"aws-rds-mysql":         {"5.7", "8.0"},
		"aws-rds-postgresql":    {"11", "12", "13"},
		"aws-aurora-mysql":      {"2"},
		"aws-aurora-postgresql": {"11", "12", "13"},
	}
	// The first version of each major that pauses at 0 ACUs (the Aurora
	// User Guide's "Scaling to Zero ACUs with automatic pause and resume")
	// and that the Data API takes (its "Supported Regions and Aurora DB
	// engines for RDS Data API"), by the service's major version.
	scalesToZero := map[string]map[string]string{
		"aws-aurora-postgresql": {"13": "13.15", "14": "14.12", "15": "15.7", "16": "16.3", "17": "17.0"},
		"aws-aurora-mysql":      {"3": "3.08.0"},
	}
	dataAPI := map[string]map[string]string{
		"aws-aurora-postgresql": {"13": "13.11", "14": "14.8", "15": "15.3", "16": "16.1", "17": "17.4"},
		"aws-aurora-mysql":      {"3": "3.07.0"},
	}

	const dir = "../../../services"
	text, err := os.ReadFile(filepath.Join(dir, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Services []struct {
			Name  string
			Plans []struct {
				Name    string
				Schemas struct {
					ServiceInstance struct{ Create struct{ Parameters schema } } `yaml:"service_instance"`
				}
				Broker struct {
					Template   string
					Parameters map[string]any `yaml:"parameters"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(text, &cat); err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, svc := range cat.Services {
		for _, p := range svc.Plans {
			if p.Broker.Template == "" {
				continue
			}
			var tmpl struct {
				Parameters map[string]struct {
					Default       any   `yaml:"Default"`
					AllowedValues []any `yaml:"AllowedValues"`
				} `yaml:"Parameters"`
			}
			file := filepath.Join(dir, p.Broker.Template)
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(body, &tmpl); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			decl, ok := tmpl.Parameters["EngineVersion"]
			if !ok {
				continue
			}
			offered := map[string]bool{fmt.Sprint(decl.Default): true}
			for _, v := range decl.AllowedValues {
				offered[fmt.Sprint(v)] = true
			}
			if prop, ok := p.Schemas.ServiceInstance.Create.Parameters.Properties["EngineVersion"]; ok {
				for _, v := range prop.Enum {
					offered[fmt.Sprint(v)] = true
				}
			}
			if v, ok := p.Broker.Parameters["EngineVersion"]; ok {
				offered[fmt.Sprint(v)] = true
			}
			versions := make([]string, 0, len(offered))
			for v := range offered {
				versions = append(versions, v)
			}
			slices.Sort(versions)
			where := svc.Name + " plan " + p.Name
			checked[svc.Name] = true
			for _, v := range versions {
				major := engineMajor(svc.Name, v)
				if slices.Contains(pastStandardSupport[svc.Name], major) {
					t.Errorf("%s offers EngineVersion %s, past the end of RDS standard support: a new instance would be enrolled in RDS Extended Support and charged for it", where, v)
				}
				if fmt.Sprint(p.Broker.Parameters["MinCapacity"]) == "0" {
					if low, ok := scalesToZero[svc.Name][major]; !ok || versionLess(engineRelease(svc.Name, v), low) {
						t.Errorf("%s fixes MinCapacity 0 but offers EngineVersion %s, which does not scale to zero (the first of its major that does: %q)", where, v, low)
					}
				}
				if fmt.Sprint(p.Broker.Parameters["DataApi"]) == "true" {
					if low, ok := dataAPI[svc.Name][major]; !ok || versionLess(engineRelease(svc.Name, v), low) {
						t.Errorf("%s turns the Data API on but offers EngineVersion %s, which the Data API does not take (the first of its major that does: %q)", where, v, low)
					}
				}
			}
		}
	}
	for svc := range pastStandardSupport {
		if !checked[svc] {
			t.Errorf("the catalog has no plan of %s with an EngineVersion: the table above names a service it no longer ships", svc)
		}
	}
}

// engineRelease is the version AWS's tables name: Aurora MySQL's own
// (8.0.mysql_aurora.3.08.2 is 3.08.2), the engine's for the others.
func engineRelease(service, version string) string {
	if service == "aws-aurora-mysql" {
		if i := strings.LastIndex(version, "."+"mysql_aurora."); i >= 0 {
			return version[i+len(".mysql_aurora."):]
		}
	}
	return version
}

// engineMajor is the major version the support calendars go by: the first
// number (Aurora MySQL's own, 3; PostgreSQL's 16), or MySQL's first two (8.0).
func engineMajor(service, version string) string {
	parts := strings.Split(engineRelease(service, version), ".")
	if service == "aws-rds-mysql" && len(parts) > 1 {
		return parts[0] + "." + parts[1]
	}
	return parts[0]
}

// versionLess compares dotted versions number by number (3.08.2 < 3.10.0).
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
