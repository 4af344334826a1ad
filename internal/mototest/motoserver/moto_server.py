# moto_server 5.2.1 with nineteen fixes.
#
# 1. A second StartExecution fails with HTTP 500
# ("cannot pickle '_thread.RLock'", moto issue 10077) because StartExecution
# deep-copies the state machine together with its running executions. The
# clone only needs the definition, so copy it without them.
import copy
import sys

from moto.stepfunctions.models import StateMachine


def _deepcopy_without_executions(self, memo):
    clone = self.__class__.__new__(self.__class__)
    memo[id(self)] = clone
    for key, value in self.__dict__.items():
        setattr(clone, key, [] if key == "executions" else copy.deepcopy(value, memo))
    return clone


StateMachine.__deepcopy__ = _deepcopy_without_executions

# 2. moto applies a DynamoDB transaction item by item and rolls back by
# restoring a copy of the table, with no lock: concurrent requests lose or
# leak each other's writes. Real DynamoDB makes each request atomic; one
# request at a time gives moto the same guarantee.
import threading  # noqa: E402

from moto.dynamodb.responses import DynamoHandler  # noqa: E402

_dynamodb_lock = threading.Lock()
_call_action = DynamoHandler.call_action


def _call_action_serialised(self):
    with _dynamodb_lock:
        return _call_action(self)


DynamoHandler.call_action = _call_action_serialised

# 3. A StopExecution can be lost on an execution in a Wait state: moto wakes
# the Wait by setting and at once clearing an Event, which only reaches a
# thread already blocked on it. A stop that lands between WaitStateEntered
# (what a test waits for) and that block leaves the execution RUNNING for
# the whole Wait; the busier the machine, the wider that window. Once the
# program has ended, stopped or failed, leave the Event set: a Wait that
# starts (or resumes) then returns at once.
from moto.stepfunctions.parser.asl.eval.environment import Environment  # noqa: E402
from moto.stepfunctions.parser.asl.eval.program_state import ProgramRunning  # noqa: E402


def _latch_when_over(change):
    def latched(self, *args, **kwargs):
        change(self, *args, **kwargs)
        with self._state_mutex:
            if self._program_state is not None and not isinstance(self._program_state, ProgramRunning):
                self.program_state_event.set()

    return latched


for _name in ("set_ended", "set_error", "set_timed_out", "set_stop"):
    setattr(Environment, _name, _latch_when_over(getattr(Environment, _name)))

# 4. UpdateStack with UsePreviousValue for a parameter that took its
# Default at creation fails with HTTP 500 (a KeyError): moto looks the
# previous value up among the values the caller passed, not among the
# stack's resolved parameters. CloudFormation keeps the previous value, the
# default, which is what the broker's CloudFormation driver relies on when
# an update leaves a parameter out.
from moto.cloudformation.models import CloudFormationBackend, Stack  # noqa: E402


def _resolve_update_parameters(self, instance, incoming_params):
    parameters = {p["ParameterKey"]: p["ParameterValue"] for p in incoming_params if "ParameterValue" in p}
    previous = dict(instance.stack_parameters) if isinstance(instance, Stack) else dict(instance.parameters or {})
    for p in incoming_params:
        if p.get("UsePreviousValue", False) and p["ParameterKey"] in previous:
            parameters[p["ParameterKey"]] = previous[p["ParameterKey"]]
    return parameters


CloudFormationBackend._resolve_update_parameters = _resolve_update_parameters

# 5. TransactWriteItems ignores ClientRequestToken. DynamoDB makes a
# transaction idempotent by it for ten minutes: a retry of a call that
# succeeded (the SDK fills the token in, and retries when an answer is lost
# or late, as on a busy machine) succeeds again without writing. moto
# applies the retry, whose conditions then fail against the first attempt's
# writes: a conditional write that succeeded is reported as a conflict.
import time  # noqa: E402

_transactions = {}
_transact_write_items = DynamoHandler.transact_write_items


def _transact_write_items_idempotent(self):
    token = self.body.get("ClientRequestToken")
    now = time.monotonic()
    for t in [t for t, (at, _) in _transactions.items() if now - at > 600]:
        del _transactions[t]
    if token and token in _transactions:
        return _transactions[token][1]
    result = _transact_write_items(self)
    if token:
        _transactions[token] = (now, result)
    return result


DynamoHandler.transact_write_items = _transact_write_items_idempotent

# 6. moto's Lambda cannot run a function's code without Docker, so a Task
# state that invokes Lambda (arn:aws:states:::lambda:invoke, or a function's
# ARN as the Resource) gets nothing real back. When MOTO_LAMBDA_ENDPOINT is
# set (the sandbox sets it, internal/sandbox), Step Functions sends those
# invocations to that URL instead: a Lambda Invoke API that runs the real
# function under the Lambda Runtime Interface Emulator. Its answer comes back
# as Lambda's would, a function error included (X-Amz-Function-Error, the
# payload's errorType naming the error that Retry and Catch match).
import os  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils  # noqa: E402

_lambda_endpoint = os.environ.get("MOTO_LAMBDA_ENDPOINT")
_boto_client_for = lambda_eval_utils.boto_client_for


def _boto_client_for_lambda_endpoint(region, service, state_credentials=None):
    if service != "lambda":
        return _boto_client_for(region=region, service=service, state_credentials=state_credentials)
    return boto3.client(
        service_name="lambda",
        region_name=region,
        endpoint_url=_lambda_endpoint,
        aws_access_key_id="ak",
        aws_secret_access_key="sk",
        # One attempt, as Step Functions' own Retry decides; no read timeout
        # shorter than the function's.
        config=Config(parameter_validation=False, retries={"total_max_attempts": 1}, read_timeout=900),
    )


if _lambda_endpoint:
    lambda_eval_utils.boto_client_for = _boto_client_for_lambda_endpoint

# 7. With IAM enforcement on (the sandbox turns it on; no test of withmoto
# does), moto checks an identity policy's Resource against the resource of
# the call, which it knows for a few services only (SQS, IAM, STS) and takes
# as "*" for the rest, so a statement naming its resources (every statement
# of the stack's roles) never allows a DynamoDB, KMS, Secrets Manager or
# Step Functions call; and it evaluates Conditions with no condition keys at
# all, and turns a failed condition of an Allow into an explicit deny. So
# identity policies are checked on actions only, Effect and NotAction
# included: what the sandbox promises, and the README says it cannot show
# resource ARNs or conditions. Trust policies (a principal given) are
# evaluated as moto does.
from moto.iam.access_control import IAMPolicyStatement, PermissionResult  # noqa: E402

_statement_is_action_permitted = IAMPolicyStatement.is_action_permitted


def _is_action_permitted_on_actions(self, action, resource="*", principal=None, incoming_condition_values=None):
    if principal is not None or incoming_condition_values is not None:
        return _statement_is_action_permitted(self, action, resource, principal, incoming_condition_values)
    if "NotAction" in self._statement:
        concerned = not self._check_element_matches("NotAction", action)
    else:
        concerned = self._check_element_matches("Action", action)
    if not concerned:
        return PermissionResult.NEUTRAL
    return PermissionResult.PERMITTED if self._statement.get("Effect") == "Allow" else PermissionResult.DENIED


IAMPolicyStatement.is_action_permitted = _is_action_permitted_on_actions

# DynamoDB authorizes a transaction by the actions of its items (PutItem,
# UpdateItem, DeleteItem, ConditionCheckItem; GetItem for a read): IAM has
# no action TransactWriteItems or TransactGetItems, which moto checks.
import json  # noqa: E402

from moto.iam.access_control import IAMRequestBase  # noqa: E402

_check_action_permitted = IAMRequestBase.check_action_permitted
_transaction_item_actions = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                             "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}


def _check_transaction_items_permitted(self, resource):
    if self._action not in ("dynamodb:TransactWriteItems", "dynamodb:TransactGetItems"):
        return _check_action_permitted(self, resource)
    transaction = self._action
    try:
        items = json.loads(self._body or b"{}").get("TransactItems", [])
        actions = sorted({_transaction_item_actions[k] for item in items for k in item if k in _transaction_item_actions})
        for action in actions or ["GetItem" if transaction.endswith("GetItems") else "PutItem"]:
            self._action = "dynamodb:" + action
            _check_action_permitted(self, resource)
    finally:
        self._action = transaction


IAMRequestBase.check_action_permitted = _check_transaction_items_permitted

# moto answers a denied call in XML whatever the service's protocol; a
# JSON-protocol client (DynamoDB, KMS, Secrets Manager, Step Functions)
# cannot read it, and reports a deserialization failure instead of
# AccessDeniedException and its message, which names the action.
from moto.core.exceptions import JsonRESTError  # noqa: E402
from moto.iam.access_control import IAMRequest  # noqa: E402

_raise_access_denied = IAMRequest._raise_access_denied


def _raise_access_denied_in_protocol(self):
    if "X-Amz-Target" in self._headers or "x-amz-target" in self._headers:
        error = JsonRESTError("AccessDeniedException",
                              f"User: {self._access_key.arn} is not authorized to perform: {self._action}")
        error.code = 403
        raise error
    _raise_access_denied(self)


IAMRequest._raise_access_denied = _raise_access_denied_in_protocol

# 8. What IAM enforcement allowed, by identity: every action a call was
# allowed (a transaction's per item, as fix 7 checks them), under the
# caller's ARN (an assumed role's is
# arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION). GET
# /moto-api/iam/allowed-actions answers {"ARN": ["service:Action", ...]}:
# the sandbox's least-privilege test compares them with what each
# function's role grants. Both of fix 7's paths call the module's
# _check_action_permitted, rebound here to record what passed.
from moto.moto_api._internal import urls as _moto_api_urls  # noqa: E402

_allowed = {}
_allowed_lock = threading.Lock()
_check_action_permitted_unrecorded = _check_action_permitted


def _check_action_permitted(self, resource):
    _check_action_permitted_unrecorded(self, resource)
    with _allowed_lock:
        _allowed.setdefault(self._access_key.arn, set()).add(self._action)


def _allowed_actions(request, full_url, headers):
    with _allowed_lock:
        body = {arn: sorted(actions) for arn, actions in _allowed.items()}
    return 200, {"Content-Type": "application/json"}, json.dumps(body)


_moto_api_urls.url_paths["{0}/moto-api/iam/allowed-actions"] = _allowed_actions

# 9. moto keeps no permissions boundary on an IAM user: CreateUser and
# CloudFormation's AWS::IAM::User drop PermissionsBoundary, GetUser never
# answers one, and Put/DeleteUserPermissionsBoundary do not exist. IAM keeps
# it and GetUser answers it (as GetRole does a role's, which moto keeps):
# ops audit reads it to find binding users without the broker's boundary.
from moto.iam.models import User as _IAMUser  # noqa: E402
from moto.iam.responses import IamResponse as _IamResponse  # noqa: E402
from moto.core.responses import EmptyResult as _EmptyResult  # noqa: E402
from moto.core.serialize import never_return, return_if_not_empty  # noqa: E402


def _user_permissions_boundary(self):
    arn = getattr(self, "_osb_boundary_arn", None)
    if not arn:
        return None
    return {"PermissionsBoundaryType": "PermissionsBoundaryPolicy", "PermissionsBoundaryArn": arn}


_IAMUser.permissions_boundary = property(_user_permissions_boundary)
_IamResponse.RESPONSE_KEY_PATH_TO_TRANSFORMER["GetUserResponse.User.PermissionsBoundary"] = return_if_not_empty
_IamResponse.RESPONSE_KEY_PATH_TO_TRANSFORMER["CreateUserResponse.User.PermissionsBoundary"] = return_if_not_empty
_IamResponse.RESPONSE_KEY_PATH_TO_TRANSFORMER["ListUsersResponse.Users.User.PermissionsBoundary"] = never_return
_create_user_response = _IamResponse.create_user


def _create_user_with_boundary(self):
    result = _create_user_response(self)
    boundary = self._get_param("PermissionsBoundary")
    if boundary:
        self.backend.get_user(self._get_param("UserName"))._osb_boundary_arn = boundary
    return result


def _put_user_permissions_boundary(self):
    self.backend.get_user(self._get_param("UserName"))._osb_boundary_arn = self._get_param("PermissionsBoundary")
    return _EmptyResult()


def _delete_user_permissions_boundary(self):
    self.backend.get_user(self._get_param("UserName"))._osb_boundary_arn = None
    return _EmptyResult()


_IamResponse.create_user = _create_user_with_boundary
_IamResponse.put_user_permissions_boundary = _put_user_permissions_boundary
_IamResponse.delete_user_permissions_boundary = _delete_user_permissions_boundary
_user_from_cloudformation = _IAMUser.create_from_cloudformation_json.__func__


def _user_from_cloudformation_with_boundary(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    user = _user_from_cloudformation(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
    boundary = cloudformation_json.get("Properties", {}).get("PermissionsBoundary")
    if boundary:
        user._osb_boundary_arn = boundary
    return user


_IAMUser.create_from_cloudformation_json = classmethod(_user_from_cloudformation_with_boundary)

# 10. CloudFormation names a queue it generates the name of (no QueueName)
# with the .fifo suffix when FifoQueue is true, as SQS requires of a FIFO
# queue; moto generates the name without it, and SQS then refuses it ("Queue
# name must end in .fifo"), so no FIFO queue of a template without a
# QueueName (the SQS example's fifo plan) can be created.
from moto.cloudformation import parsing as _cfn_parsing  # noqa: E402
from moto.sqs.models import Queue as _SQSQueue  # noqa: E402

_queue_from_cloudformation = _SQSQueue.create_from_cloudformation_json.__func__


def _queue_from_cloudformation_fifo_named(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    properties = cloudformation_json.get("Properties") or {}
    fifo = str(properties.get("FifoQueue", "false")).lower() == "true"
    if fifo and "QueueName" not in properties and not str(resource_name).endswith(".fifo"):
        resource_name = str(resource_name)[:80 - len(".fifo")] + ".fifo"
    return _queue_from_cloudformation(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)


_SQSQueue.create_from_cloudformation_json = classmethod(_queue_from_cloudformation_fifo_named)

# 11. When a resource of a new stack cannot be created, CreateStack answers
# the resource's error (CloudFormation answers the stack's id, and the
# failure is the stack's: CREATE_FAILED on the resource, then a rollback to
# ROLLBACK_COMPLETE), and the stack stays half made in CREATE_PENDING: every
# later DescribeStacks that lists it evaluates its outputs, which tries to
# make the resource again and fails, so moto answers HTTP 500 to every
# stack listing from then on, for every caller. Roll such a stack back as
# CloudFormation does: the resource's CREATE_FAILED event with the error's
# message, ROLLBACK_IN_PROGRESS naming the failed resource, the resources
# made so far deleted, ROLLBACK_COMPLETE (CREATE_FAILED, keeping them, when
# rollback is disabled), with no resources or outputs left to evaluate.
# A template refused before the stack exists (moto's validation) is still
# refused by CreateStack, as CloudFormation refuses an invalid template.
from moto.cloudformation.models import Event as _CFNEvent  # noqa: E402
from moto.cloudformation.parsing import OutputMap as _CFNOutputMap  # noqa: E402

_parse_and_create_resource = _cfn_parsing.parse_and_create_resource


def _parse_and_create_resource_named(logical_id, resource_json, resources_map, account_id, region_name):
    try:
        return _parse_and_create_resource(logical_id, resource_json, resources_map, account_id, region_name)
    except Exception as error:
        # The innermost resource is the one that failed (one being made
        # for a reference of another is made inside its creation).
        if not hasattr(error, "_osb_logical_id"):
            error._osb_logical_id = logical_id
            error._osb_resource_type = resource_json.get("Type", "")
        raise


_cfn_parsing.parse_and_create_resource = _parse_and_create_resource_named
_create_stack = CloudFormationBackend.create_stack


def _error_message(error):
    return str(getattr(error, "message", None) or getattr(error, "description", None) or error)


def _create_stack_or_roll_back(self, *args, **kwargs):
    name = kwargs.get("name", args[0] if args else None)
    before = set(self.stacks)
    try:
        return _create_stack(self, *args, **kwargs)
    except Exception as e:
        made = [s for stack_id, s in self.stacks.items() if stack_id not in before and s.name == name]
        if not made:
            raise
        stack, error = made[0], e
    logical_id = getattr(error, "_osb_logical_id", None) or stack.name
    resource_type = getattr(error, "_osb_resource_type", None) or "AWS::CloudFormation::Stack"
    failed = _CFNEvent(stack_id=stack.stack_id, stack_name=stack.name, logical_resource_id=logical_id,
                       physical_resource_id="", resource_type=resource_type, resource_status="CREATE_FAILED",
                       resource_status_reason=f'Resource handler returned message: "{_error_message(error)}"',
                       resource_properties=None)
    stack.events.append(failed)
    if stack.disable_rollback:
        stack.status = "CREATE_FAILED"
        stack._add_stack_event("CREATE_FAILED", resource_status_reason=f"The following resource(s) failed to create: [{logical_id}]. ")
    else:
        stack._add_stack_event("ROLLBACK_IN_PROGRESS", resource_status_reason=(
            f"The following resource(s) failed to create: [{logical_id}]. Rollback requested by user."))
        try:
            stack.resource_map.delete()
        except Exception:  # noqa: BLE001 - a resource that will not go stays, as DELETE_SKIPPED would
            pass
        stack.status = "ROLLBACK_COMPLETE"
        stack._add_stack_event("ROLLBACK_COMPLETE")
    # Nothing left that a listing would try to make again: the resources
    # still there, and no outputs.
    resources = stack.resource_map
    resources._resource_json_map = {k: v for k, v in resources._resource_json_map.items()
                                     if not isinstance(resources._parsed_resources.get(k, ""), str)}
    stack.output_map = _CFNOutputMap(stack.resource_map, {}, stack.stack_id)
    return stack


CloudFormationBackend.create_stack = _create_stack_or_roll_back

# 12. moto keeps every finished Step Functions execution (each with a copy
# of its state machine and the interpreter's whole state) and every deleted
# stack (with its template and resources) for as long as it runs: over a
# long run of the sandbox (200 lifecycles and a fuzz run) it grew to 9.8
# GB. AWS ages them out (an execution's history after 90 days, a deleted
# stack's after 90 days); keep the newest MOTO_KEEP_FINISHED (default 500)
# finished executions of each state machine and deleted stacks of each
# account and Region, which no caller of the broker's reads again once it
# has seen them end (the broker never reads an execution; its driver reads
# a deleted stack right after the delete). A running execution is never
# dropped.
from moto.stepfunctions.parser.models import StepFunctionsParserBackend  # noqa: E402

_keep_finished = int(os.environ.get("MOTO_KEEP_FINISHED", "500"))
_executions_lock = threading.RLock()
_start_execution_kept = StepFunctionsParserBackend.start_execution


def _start_execution_bounded(self, state_machine_arn, *args, **kwargs):
    with _executions_lock:
        execution = _start_execution_kept(self, state_machine_arn, *args, **kwargs)
        executions = self.describe_state_machine(state_machine_arn).executions
        # The new execution is not counted, however soon it ends (a Pass
        # machine may have ended already on a busy machine): the newest
        # finished ones stay beside it.
        finished = [e for e in executions
                    if e is not execution
                    and getattr(e, "exec_status", None) is not None and e.status != "RUNNING"]
        for old in sorted(finished, key=lambda e: e.start_date)[:max(0, len(finished) - _keep_finished)]:
            executions.remove(old)
    return execution


StepFunctionsParserBackend.start_execution = _start_execution_bounded
_stacks_lock = threading.RLock()  # delete_stack by name calls itself by id
_delete_stack_kept = CloudFormationBackend.delete_stack


def _delete_stack_bounded(self, name_or_stack_id):
    with _stacks_lock:
        _delete_stack_kept(self, name_or_stack_id)
        while len(self.deleted_stacks) > _keep_finished:
            self.deleted_stacks.pop(next(iter(self.deleted_stacks)))  # the oldest deleted


CloudFormationBackend.delete_stack = _delete_stack_bounded


# 13. Deleting a stack whose S3 bucket holds objects succeeds in moto: the
# bucket's delete quietly keeps a bucket with keys, and the stack is gone.
# CloudFormation fails that resource (DELETE_FAILED, "The bucket you tried
# to delete is not empty") and the stack with it (DELETE_FAILED, naming
# the resource), after deleting the rest; the stack stays until a later
# DeleteStack finds the bucket empty. The broker's driver relies on that: it
# asks again a few times, then fails the deprovision naming the bucket.
from moto.cloudformation.models import Event as _StackEvent  # noqa: E402
from moto.cloudformation.responses import StackResourceDTO as _StackResourceDTO  # noqa: E402
from moto.s3.models import FakeBucket as _FakeBucket  # noqa: E402

_BUCKET_NOT_EMPTY = ("The bucket you tried to delete is not empty (Service: S3, Status Code: 409, "
                     "Error Code: BucketNotEmpty)")
_stack_delete = Stack.delete
_delete_stack = CloudFormationBackend.delete_stack


def _full_buckets(stack):
    resources = stack.resource_map
    return sorted(
        lid for lid, res in resources._parsed_resources.items()
        if isinstance(res, _FakeBucket) and res.keys
        and resources._resource_json_map.get(lid, {}).get("DeletionPolicy") != "Retain")


def _stack_delete_failing_full_buckets(self):
    full = _full_buckets(self)
    if not full:
        return _stack_delete(self)
    self._add_stack_event("DELETE_IN_PROGRESS", resource_status_reason="User Initiated")
    resources = self.resource_map
    kept = {lid: resources._resource_json_map[lid] for lid in full}
    for lid in full:  # the rest goes; these are kept for the next try
        resources._resource_json_map[lid] = dict(kept[lid], DeletionPolicy="Retain")
    try:
        resources.delete()
    finally:
        resources._resource_json_map.update(kept)
    for lid in [lid for lid in resources._resource_json_map if lid not in resources._parsed_resources]:
        del resources._resource_json_map[lid]  # deleted: no longer the stack's
    for lid in full:
        bucket = resources._parsed_resources[lid]
        bucket._osb_status, bucket._osb_reason = "DELETE_FAILED", _BUCKET_NOT_EMPTY
        self.events.append(_StackEvent(stack_id=self.stack_id, stack_name=self.name, logical_resource_id=lid,
                                       physical_resource_id=bucket.physical_resource_id, resource_type="AWS::S3::Bucket",
                                       resource_status="DELETE_FAILED", resource_status_reason=_BUCKET_NOT_EMPTY,
                                       resource_properties=None))
    reason = "The following resource(s) failed to delete: [%s]. " % ", ".join(full)
    self._add_stack_event("DELETE_FAILED", resource_status_reason=reason)
    self.status, self.stack_status_reason = "DELETE_FAILED", reason


def _delete_stack_failing_full_buckets(self, name_or_stack_id):
    stack = self.stacks.get(name_or_stack_id) or next(
        (s for s in self.stacks.values() if s.name == name_or_stack_id), None)
    if stack is not None and _full_buckets(stack):
        stack.delete()  # DELETE_FAILED: the stack stays
        return
    _delete_stack(self, name_or_stack_id)


_stack_resource_dto_init = _StackResourceDTO.__init__


def _stack_resource_dto_with_status(self, stack, resource):
    _stack_resource_dto_init(self, stack, resource)
    if getattr(resource, "_osb_status", None) and stack.status == "DELETE_FAILED":
        self.resource_status, self.resource_status_reason = resource._osb_status, resource._osb_reason


Stack.delete = _stack_delete_failing_full_buckets
CloudFormationBackend.delete_stack = _delete_stack_failing_full_buckets
_StackResourceDTO.__init__ = _stack_resource_dto_with_status

# 14. moto never tags a stack's queues, buckets or tables with the stack's
# tags, and an update (a change set executed) changes neither the stack's
# tags nor a resource's Tags property on a queue. CloudFormation gives the
# stack the tags a change set carries, and every resource that takes tags
# its Tags property and the stack's tags (a tag an update drops goes). The
# broker's stacks carry their instance's tags (instance, plan, the
# platform's names), which a tagged cost report or policy reads.
from moto.dynamodb.models.table import Table as _DynamoTable  # noqa: E402
from moto.s3.models import s3_backends as _s3_backends  # noqa: E402
from moto.sqs.models import Queue as _SQSQueue  # noqa: E402
from moto.cloudformation.parsing import clean_json as _clean_json  # noqa: E402


def _wanted_tags(stack, lid):
    wanted = {k: v for k, v in (stack.tags or {}).items() if not k.startswith("aws:")}
    props = (stack.template_dict.get("Resources", {}).get(lid) or {}).get("Properties") or {}
    try:
        tags = _clean_json(props.get("Tags") or [], stack.resource_map)
    except Exception:  # a value moto cannot resolve: the tags it can
        tags = props.get("Tags") or []
    for tag in tags if isinstance(tags, list) else []:
        if isinstance(tag, dict) and isinstance(tag.get("Key"), str) and isinstance(tag.get("Value"), str):
            wanted[tag["Key"]] = tag["Value"]
    return wanted


def _propagate_tags(stack):
    if not stack.resource_map or not hasattr(stack, "template_dict"):
        return
    for lid, res in list(stack.resource_map._parsed_resources.items()):
        if not isinstance(res, (_SQSQueue, _FakeBucket, _DynamoTable)):
            continue
        wanted = _wanted_tags(stack, lid)
        before = getattr(res, "_osb_tags", {})
        if isinstance(res, _SQSQueue):
            for k in before:
                res.tags.pop(k, None)
            res.tags.update(wanted)
        elif isinstance(res, _FakeBucket):
            backend = _s3_backends[res.account_id][res.partition]
            current = {t["Key"]: t["Value"] for t in backend.get_bucket_tagging(res.name).get("Tags", [])}
            for k in before:
                current.pop(k, None)
            current.update(wanted)
            backend.put_bucket_tagging(res.name, current)
        else:
            res.tags = [t for t in res.tags if t["Key"] not in before and t["Key"] not in wanted]
            res.tags.extend({"Key": k, "Value": v} for k, v in wanted.items())
        res._osb_tags = wanted


_create_resources = Stack.create_resources
_execute_change_set = CloudFormationBackend.execute_change_set
_stack_update = Stack.update


def _create_resources_tagged(self):
    _create_resources(self)
    _propagate_tags(self)


def _execute_change_set_tagged(self, change_set_name, stack_name=None):
    _execute_change_set(self, change_set_name, stack_name)
    change_set = self.change_sets.get(change_set_name) or next(
        (cs for cs in self.change_sets.values() if cs.change_set_name == change_set_name), None)
    stack = self.stacks.get(change_set.stack_id) if change_set else None
    if stack is None:
        return
    if change_set.tags is not None:
        stack.tags = dict(change_set.tags)
    stack._parse_template()
    _propagate_tags(stack)


def _stack_update_tagged(self, *args, **kwargs):
    _stack_update(self, *args, **kwargs)
    _propagate_tags(self)


Stack.create_resources = _create_resources_tagged
CloudFormationBackend.execute_change_set = _execute_change_set_tagged
Stack.update = _stack_update_tagged


# 15. moto's CloudFormation makes an AWS::RDS::DBInstance without reading
# ManageMasterUserPassword, so RDS's managed master secret is never made, and
# refuses Fn::GetAtt MasterUserSecret.SecretArn, which the RDS templates
# output. Its RDS API makes that secret (rds!db-…, deleted with the database);
# have CloudFormation's path make it too, and answer its ARN.
from moto.rds.models import DBInstance as _DBInstance  # noqa: E402
from moto.rds.models import MasterUserSecret as _MasterUserSecret  # noqa: E402

_db_from_cloudformation = _DBInstance.create_from_cloudformation_json.__func__
_db_cfn_attribute = _DBInstance.get_cfn_attribute
_db_has_cfn_attr = _DBInstance.has_cfn_attr.__func__


def _db_from_cloudformation_with_secret(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    database = _db_from_cloudformation(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
    if str(cloudformation_json.get("Properties", {}).get("ManageMasterUserPassword")).lower() == "true":
        database.manage_master_user_password = True
        database.master_user_secret = _MasterUserSecret(database, None)
    return database


def _db_cfn_attribute_with_secret(self, attribute_name):
    if attribute_name == "MasterUserSecret.SecretArn" and getattr(self, "manage_master_user_password", False):
        return self.master_user_secret.secret_arn
    return _db_cfn_attribute(self, attribute_name)


def _db_has_cfn_attr_with_secret(cls, attr):
    return attr == "MasterUserSecret.SecretArn" or _db_has_cfn_attr(cls, attr)


_DBInstance.create_from_cloudformation_json = classmethod(_db_from_cloudformation_with_secret)
_DBInstance.get_cfn_attribute = _db_cfn_attribute_with_secret
_DBInstance.has_cfn_attr = classmethod(_db_has_cfn_attr_with_secret)


# 16. With IAM enforcement on, moto refuses with SignatureDoesNotMatch every
# S3 request whose query or path holds a percent-escape (aws-cli's
# `s3 ls s3://BUCKET` sends delimiter=%2F), whatever the keys: it signs
# werkzeug's request.url, an IRI in which %2F is already "/", where the
# client signed the escape. SigV4 signs each query name and value, and S3
# the path, percent-encoded but for the unreserved characters (and "/" in
# the path), so decode moto's URL and encode it so again.
from urllib.parse import quote, unquote  # noqa: E402

from moto.iam.access_control import S3IAMRequest  # noqa: E402

_s3_iam_request_init = S3IAMRequest.__init__


def _canonical_s3_path(path):
    path, _, query = path.partition("?")
    path = quote(unquote(path), safe="/~")
    if not query:
        return path
    pairs = []
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        pairs.append(quote(unquote(name), safe="-_.~") + eq + quote(unquote(value), safe="-_.~"))
    return path + "?" + "&".join(pairs)


def _s3_iam_request_as_signed(self, *args, path, **kwargs):
    _s3_iam_request_init(self, *args, path=_canonical_s3_path(path), **kwargs)


S3IAMRequest.__init__ = _s3_iam_request_as_signed

# 17. moto's CloudFormation has no model for AWS::SecretsManager::Secret: it
# skips the resource ("No Moto CloudFormation support"), so a template's
# secret is never made and its Ref is its logical id. Make it as Secrets
# Manager would: Name (or a generated name), GenerateSecretString's
# password under GenerateStringKey in SecretStringTemplate (or
# SecretString), the Ref its ARN; deleted with the stack, at once.
from moto.core.common_models import CloudFormationModel  # noqa: E402
from moto.secretsmanager.models import secretsmanager_backends  # noqa: E402


def _flag(v):
    return str(v).lower() == "true"


class _CfnSecret(CloudFormationModel):
    # moto's models register under the service their module names.
    __module__ = "moto.secretsmanager.models"

    def __init__(self, account_id, region_name, arn):
        self.account_id, self.region_name, self.arn = account_id, region_name, arn

    @staticmethod
    def cloudformation_name_type():
        return "Name"

    @staticmethod
    def cloudformation_type():
        return "AWS::SecretsManager::Secret"

    @property
    def physical_resource_id(self):
        return self.arn

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        props = cloudformation_json.get("Properties", {})
        backend = secretsmanager_backends[account_id][region_name]
        value = props.get("SecretString")
        gen = props.get("GenerateSecretString")
        if gen is not None:
            password = json.loads(backend.get_random_password(
                password_length=int(gen.get("PasswordLength", 32)),
                exclude_characters=gen.get("ExcludeCharacters", ""),
                exclude_numbers=_flag(gen.get("ExcludeNumbers")),
                exclude_punctuation=_flag(gen.get("ExcludePunctuation")),
                exclude_uppercase=_flag(gen.get("ExcludeUppercase")),
                exclude_lowercase=_flag(gen.get("ExcludeLowercase")),
                include_space=_flag(gen.get("IncludeSpace")),
                require_each_included_type=_flag(gen.get("RequireEachIncludedType", "true"))))["RandomPassword"]
            if gen.get("GenerateStringKey"):
                template = json.loads(gen.get("SecretStringTemplate") or "{}")
                template[gen["GenerateStringKey"]] = password
                value = json.dumps(template)
            else:
                value = password
        out = json.loads(backend.create_secret(
            name=props.get("Name") or resource_name, secret_string=value, secret_binary=None,
            description=props.get("Description"), tags=props.get("Tags"), kms_key_id=props.get("KmsKeyId"),
            client_request_token=None, replica_regions=[], force_overwrite=False))
        return cls(account_id, region_name, out["ARN"])

    def delete(self, account_id, region_name):
        secretsmanager_backends[account_id][region_name].delete_secret(self.arn, None, True)


# 18. moto's CloudFormation answers a Lambda-backed custom resource
# (Custom::NAME) by invoking the ServiceToken's function through Docker,
# which is not here, with a ResponseURL at host.docker.internal:5000, and
# leaves the stack CREATE_IN_PROGRESS until a SUCCESS reaches it; it sends
# no Delete, and ignores a FAILED answer. When the function in moto's
# Lambda has the environment variable MOTO_CUSTOM_RESOURCE_URL (a test
# sets it: a named fake of Lambda that runs the real handler), send the
# Create and the Delete to that URL, as CloudFormation's event (the
# ResponseURL this server's own), the Delete waiting for its answer as
# CloudFormation does; keep the PhysicalResourceId a SUCCESS answers (the
# Delete names it); a FAILED answer fails the stack, with its Reason. The
# answer carries no credentials (CloudFormation's is a presigned URL): its
# stack is found in the account and Region its StackId names, so that a
# stack of another account (a placed plan's) gets its answer too.
import urllib.request  # noqa: E402

from moto.awslambda import lambda_backends  # noqa: E402
from moto.awslambda_simple.models import lambda_simple_backends  # noqa: E402
from moto.cloudformation import custom_model as _custom_model  # noqa: E402
from moto.cloudformation import responses as _cfn_responses  # noqa: E402
from moto.cloudformation.models import cloudformation_backends  # noqa: E402


def _own_address():
    args = sys.argv[1:]
    host = args[args.index("-H") + 1] if "-H" in args else "127.0.0.1"
    port = args[args.index("-p") + 1] if "-p" in args else "5000"
    return f"http://{host}:{port}"


def _custom_resource_url(account_id, region_name, service_token):
    # Configured not to use Docker (mototest does), moto serves Lambda from
    # awslambda_simple's backends, where CloudFormation does not look.
    for backends in (lambda_simple_backends, lambda_backends):
        try:
            fn = backends[account_id][region_name].get_function(service_token)
        except Exception:  # noqa: BLE001 - not in this backend
            continue
        return (fn.environment_vars or {}).get("MOTO_CUSTOM_RESOURCE_URL")
    return None


def _send_custom_event(url, event):
    req = urllib.request.Request(url, data=json.dumps(event).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        resp.read()


_custom_create = _custom_model.CustomModel.create_from_cloudformation_json
_deleting = {}


def _custom_create_to_url(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    properties = cloudformation_json["Properties"]
    url = _custom_resource_url(account_id, region_name, properties["ServiceToken"])
    if not url:
        return _custom_create.__func__(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
    stack_id = kwargs["StackId"]
    resource = cls(region_name, str(mock_random.uuid4()), kwargs["LogicalId"], resource_name)
    resource.event = {
        "ServiceToken": properties["ServiceToken"],
        "ResponseURL": f"{_own_address()}/cloudformation_{region_name}/cfnresponse?stack={stack_id}",
        "StackId": stack_id, "LogicalResourceId": kwargs["LogicalId"], "ResourceType": kwargs["ResourceType"],
        "ResourceProperties": properties,
    }
    resource.url, resource.account_id, resource.stack_id = url, account_id, stack_id
    cloudformation_backends[account_id][region_name].get_stack(stack_id).add_custom_resource(resource)
    event = dict(resource.event, RequestType="Create", RequestId=resource.request_id)
    threading.Thread(target=_send_custom_event, args=(url, event), daemon=True).start()
    return resource


def _custom_delete(self, account_id, region_name):
    url = getattr(self, "url", None)
    if not url:
        return
    event = dict(self.event, RequestType="Delete", RequestId=str(mock_random.uuid4()),
                 PhysicalResourceId=getattr(self, "answered_id", None) or self.resource_name)
    # moto takes the stack off its list before it deletes its resources:
    # the answer finds the resource here.
    _deleting[(self.stack_id, self.logical_id)] = self
    try:
        _send_custom_event(url, event)
    finally:
        _deleting.pop((self.stack_id, self.logical_id), None)
    if getattr(self, "delete_failure", None):
        raise RuntimeError(self.delete_failure)


def _process_cfn_response_kept(self):
    deleted = _deleting.get((self._get_param("StackId"), self._get_param("LogicalResourceId")))
    if deleted is not None:
        if self._get_param("Status") != "SUCCESS":
            deleted.delete_failure = self._get_param("Reason")
        return 200, {"status": 200}, json.dumps("{}")
    stack_id = self._get_param("StackId")
    parts = stack_id.split(":")
    backend = cloudformation_backends[parts[4]][parts[3]] if len(parts) > 5 else self.cloudformation_backend
    stack = backend.get_stack(stack_id)
    resource = stack.get_custom_resource(self._get_param("LogicalResourceId"))
    if self._get_param("Status") == "SUCCESS":
        resource.answered_id = self._get_param("PhysicalResourceId")
        resource.set_data(self._get_param("Data") or {})
        stack.verify_readiness()
    else:
        stack.status = "ROLLBACK_COMPLETE"
        stack.status_reason = self._get_param("Reason")
        stack._add_stack_event("CREATE_FAILED", resource_status_reason=self._get_param("Reason"))
    return 200, {"status": 200}, json.dumps("{}")


from moto.moto_api._internal import mock_random  # noqa: E402

_custom_model.CustomModel.create_from_cloudformation_json = classmethod(_custom_create_to_url)
_custom_model.CustomModel.delete = _custom_delete
_cfn_responses.CloudFormationResponse.process_cfn_response = _process_cfn_response_kept

# 19. A role that moto's CloudFormation makes keeps each of its inline
# policies (Policies) as the template's mapping, not as JSON text, and
# with IAM enforcement on, every call of a session of that role fails with
# HTTP 500 (KeyError 'policy_document') where moto reads the policy: the
# target stack's role, which the broker assumes in a target account. Read
# such a mapping as the document it is.
import json  # noqa: E402

from moto.iam.access_control import IAMPolicy  # noqa: E402

_iam_policy_init = IAMPolicy.__init__


def _iam_policy_of_mapping(self, policy):
    if isinstance(policy, dict) and "policy_document" not in policy:
        policy = json.dumps(policy)
    _iam_policy_init(self, policy)


IAMPolicy.__init__ = _iam_policy_of_mapping

from moto.server import main  # noqa: E402

main(sys.argv[1:])
