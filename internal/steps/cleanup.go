package steps

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/serverless-osb/broker/internal/broker"
)

// detachLeftovers detaches what a failed op leaves behind, as its driver
// names it. When the instance is gone already, every record still under it
// is a leftover.
func (s *Steps) detachLeftovers(ctx context.Context, op broker.Operation, reason string) error {
	if op.Kind == broker.KindDeprovision || op.Kind == broker.KindUnbind {
		return nil // the resource stays attached to the instance or binding
	}
	inst, err := s.Store.GetInstance(ctx, op.InstanceID)
	if errors.Is(err, broker.ErrNotFound) {
		return s.detachAll(ctx, op, op.PlanID, reason)
	}
	if err != nil {
		return &TransientError{Err: fmt.Errorf("detach leftovers of %s: %w", op.ID, err)}
	}
	change := broker.Change{Operation: op, Instance: inst}
	if op.Kind.IsBinding() {
		change.Binding = &broker.Binding{InstanceID: op.InstanceID, ID: op.BindingID}
		if b, err := s.Store.GetBinding(ctx, op.InstanceID, op.BindingID); err == nil {
			change.Binding = &b
		}
	}
	driver, plan, settings, err := s.driverFor(inst.PlanID)
	if err != nil {
		return err
	}
	change.Service, change.Plan, change.Settings = s.Catalog.Service(inst.ServiceID), plan, settings
	names, err := driver.Leftovers(ctx, change)
	if err != nil {
		return s.classify(ctx, err)
	}
	for _, name := range names {
		if err := s.detach(ctx, op, inst.PlanID, name, reason); err != nil {
			return err
		}
	}
	return nil
}

// detachAll detaches every resource record of op's instance.
func (s *Steps) detachAll(ctx context.Context, op broker.Operation, planID, reason string) error {
	records, err := s.Store.ListResources(ctx, op.InstanceID)
	if err != nil {
		return &TransientError{Err: fmt.Errorf("list resources of %s: %w", op.InstanceID, err)}
	}
	for _, r := range records {
		if err := s.detach(ctx, op, planID, r.Name, reason); err != nil {
			return err
		}
	}
	return nil
}

// detach moves one resource record into a detached record and starts its
// cleanup (or leaves that to the reaper when there is no engine, or the
// start fails).
func (s *Steps) detach(ctx context.Context, op broker.Operation, planID, name, reason string) error {
	r, err := s.Store.GetResource(ctx, op.InstanceID, name)
	if errors.Is(err, broker.ErrNotFound) {
		return nil
	}
	if err != nil {
		return &TransientError{Err: fmt.Errorf("read resource %s of %s: %w", name, op.InstanceID, err)}
	}
	now := s.Now()
	d := broker.Detached{
		ID: broker.DetachedID(op.InstanceID, name, op.ID), InstanceID: op.InstanceID, Name: name, Data: r.Data,
		PlanID: planID, OperationID: op.ID, Reason: reason, State: broker.DetachedPending, CreatedAt: now, UpdatedAt: now,
	}
	if err := s.Store.DetachResource(ctx, d); err != nil && !errors.Is(err, broker.ErrNotFound) {
		return &TransientError{Err: fmt.Errorf("detach resource %s of %s: %w", name, op.InstanceID, err)}
	}
	s.Logger.InfoContext(ctx, "resource detached for cleanup", "detached_id", d.ID, "resource", name)
	if s.Engine == nil {
		return nil
	}
	stored, err := s.Store.GetDetached(ctx, d.ID)
	if err == nil && stored.State == broker.DetachedPending {
		if _, err := broker.StartCleanup(ctx, s.Store, s.Engine, stored, now); err != nil {
			s.Logger.WarnContext(ctx, "start cleanup; the reaper will", "detached_id", d.ID, "error", err.Error())
		}
	}
	return nil
}

// CleanupDelete asks the driver to delete a detached resource.
func (s *Steps) CleanupDelete(ctx context.Context, id string) (Progress, error) {
	d, err := s.Store.GetDetached(ctx, id)
	if errors.Is(err, broker.ErrNotFound) {
		return Progress{Done: true}, nil // deleted already
	}
	if err != nil {
		return Progress{}, &TransientError{Err: fmt.Errorf("read detached %s: %w", id, err)}
	}
	driver, _, _, err := s.driverFor(d.PlanID)
	if err != nil {
		return Progress{}, err
	}
	p, err := driver.Cleanup(ctx, d)
	if err != nil {
		var f *broker.Failure
		if errors.As(err, &f) {
			return Progress{}, &PermanentError{Description: f.Description}
		}
		s.Logger.WarnContext(ctx, "transient cleanup error", "error", err.Error())
		return Progress{}, &TransientError{Err: err}
	}
	if p.Done {
		return Progress{Done: true}, nil
	}
	return Progress{RetryAfter: max(1, int(math.Ceil(p.RetryAfter.Seconds())))}, nil
}

// CleanupDeleted removes the record of a resource the driver deleted.
func (s *Steps) CleanupDeleted(ctx context.Context, id string) error {
	if err := s.Store.DeleteDetached(ctx, id); err != nil {
		return &TransientError{Err: fmt.Errorf("remove detached %s: %w", id, err)}
	}
	s.Logger.InfoContext(ctx, "detached resource deleted")
	return nil
}

// CleanupGaveUp records that a detached resource could not be deleted: it
// stays listed for an operator.
func (s *Steps) CleanupGaveUp(ctx context.Context, id, description string) error {
	d, err := s.Store.GetDetached(ctx, id)
	if errors.Is(err, broker.ErrNotFound) {
		return nil
	}
	if err != nil {
		return &TransientError{Err: fmt.Errorf("read detached %s: %w", id, err)}
	}
	failed := d
	failed.State, failed.Failure, failed.UpdatedAt = broker.DetachedFailed, description, s.Now()
	if err := s.Store.UpdateDetached(ctx, failed, d.Attempts); err != nil && !errors.Is(err, broker.ErrNotFound) {
		var c *broker.ConflictError
		if errors.As(err, &c) {
			return nil // another cleanup started meanwhile: it decides
		}
		return &TransientError{Err: fmt.Errorf("record failed cleanup of %s: %w", id, err)}
	}
	s.Logger.ErrorContext(ctx, "cleanup gave up: the resource stays listed for an operator", "resource", d.Name)
	return nil
}
