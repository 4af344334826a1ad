# moto_server 5.2.1 with two fixes.
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

from moto.server import main  # noqa: E402

main(sys.argv[1:])
