package drivers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/catalog"
)

// The lock file beside a catalog (LockPath: catalog.yaml's is
// catalog.lock.json) records, for every plan whose driver deploys what the
// catalog ships (broker.Versioned: the CloudFormation driver's templates
// and fixed parameters), its maintenance_info version and the digest of
// what it deploys. An instance runs the version it was provisioned or last
// upgraded on, so a changed template under the same version would reach
// instances unannounced (a plan change or an upgrade takes the plan as it
// is now): CheckLock refuses it, at make build (WriteLock) and at start
// (Build). Raising the version, which platforms then offer as an upgrade,
// lets make build record the new digest.

// LockedPlan is what the lock file records of one plan.
type LockedPlan struct {
	Service string `json:"service"`
	Plan    string `json:"plan"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// Lock is a lock file: the versioned plans, by plan id.
type Lock struct {
	Plans map[string]LockedPlan `json:"plans"`
}

// LockPath is the lock file of the catalog at path.
func LockPath(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".lock.json"
}

// checkLockAtStart refuses to start on a catalog whose lock file beside it
// records another digest for a plan's version; without a lock file there
// is nothing to compare with.
func checkLockAtStart(cat *catalog.Catalog, configured []configured) error {
	if cat.Dir == "" || cat.Source == "" {
		return nil // a catalog not read from a file
	}
	lockPath := LockPath(filepath.Join(cat.Dir, cat.Source))
	locked, ok, err := ReadLock(lockPath)
	if err != nil || !ok {
		return err
	}
	return CheckLock(versions(cat, configured), locked, lockPath)
}

// Versions are the catalog's versioned plans as they are now, by plan id.
func Versions(cat *catalog.Catalog) (Lock, error) {
	configured, err := configureAll(cat)
	if err != nil {
		return Lock{}, err
	}
	return versions(cat, configured), nil
}

func versions(cat *catalog.Catalog, configured []configured) Lock {
	lock := Lock{Plans: map[string]LockedPlan{}}
	for _, c := range configured {
		v, ok := c.settings.(broker.Versioned)
		if !ok {
			continue
		}
		lp := LockedPlan{Plan: c.plan.Name, Digest: v.PlanDigest()}
		if svc, _ := cat.PlanByID(c.plan.ID); svc != nil {
			lp.Service = svc.Name
		}
		if c.plan.MaintenanceInfo != nil {
			lp.Version = c.plan.MaintenanceInfo.Version
		}
		lock.Plans[c.plan.ID] = lp
	}
	return lock
}

// ReadLock reads the lock file at path; ok is false when there is none.
func ReadLock(path string) (lock Lock, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Lock{}, false, nil
	}
	if err != nil {
		return Lock{}, false, err
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return Lock{}, false, fmt.Errorf("%s: not a lock file: %v", path, err)
	}
	return lock, true, nil
}

// CheckLock compares the plans as they are now with the lock: a plan
// whose digest changed under the version the lock records is refused,
// one line per plan, naming the plan and what to do.
func CheckLock(now, locked Lock, lockPath string) error {
	var problems []string
	for _, id := range slices.Sorted(maps.Keys(now.Plans)) {
		p, was := now.Plans[id], locked.Plans[id]
		if _, ok := locked.Plans[id]; !ok || p.Version != was.Version || p.Digest == was.Digest {
			continue
		}
		version := fmt.Sprintf("maintenance_info version %q", p.Version)
		if p.Version == "" {
			version = "no maintenance_info"
		}
		problems = append(problems, fmt.Sprintf(
			"plan %s of %s (%s): its templates or fixed parameters changed, but it still has %s (%s records it with other templates); instances would take the change unannounced. Raise the plan's maintenance_info version and describe the change in its description, so that platforms offer it as an upgrade",
			p.Plan, p.Service, id, version, filepath.Base(lockPath)))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// WriteLock checks the catalog at path against its lock file, then
// writes the lock of the plans as they are now (a raised version takes
// its new digest; a plan gone from the catalog leaves the lock). It is
// what make build runs.
func WriteLock(cat *catalog.Catalog, path string) (string, error) {
	now, err := Versions(cat)
	if err != nil {
		return "", err
	}
	lockPath := LockPath(path)
	locked, _, err := ReadLock(lockPath)
	if err != nil {
		return "", err
	}
	if err := CheckLock(now, locked, lockPath); err != nil {
		return "", err
	}
	if len(now.Plans) == 0 {
		return "", nil // nothing versioned: no lock file to keep
	}
	b, err := json.MarshalIndent(now, "", "  ")
	if err != nil {
		return "", err
	}
	return lockPath, os.WriteFile(lockPath, append(b, '\n'), 0o644)
}
