# moto_server 5.2.1 with one fix: a second StartExecution fails with HTTP 500
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

from moto.server import main  # noqa: E402

main(sys.argv[1:])
