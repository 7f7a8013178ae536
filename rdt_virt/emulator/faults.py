# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Injected failures: operations the emulated kernel refuses on request.

A real host refuses writes for reasons the model does not produce on its
own at a chosen moment: a CPU going offline under a schemata write (EIO),
``kzalloc`` failing in mkdir (ENOSPC, "Kernel out of memory"), a counter
read the hardware answers with an error. Tests ask for such a refusal
through the control socket (``fail``); the FUSE layer asks :meth:`Faults.
check` before it hands an operation to the tree.

A rule names an operation (``mkdir``, ``rmdir``, ``write``, ``read``,
``rename``), a glob over the path in the mount (``/rdtvirt-*/tasks``;
``*`` also matches ``/``), an errno name, how many matching calls to let
through first (``skip``) and how many to refuse (``count``; 0: until
cleared). A refused call leaves ``info/last_cmd_status`` as the kernel
would for a failure of that operation:

* writes to group files and renames clear it first, then append the
  rule's ``status`` text (``rdt_last_cmd_clear`` then ``_puts``);
* mkdir only appends (it never clears, so an older text lingers);
* rmdir and reads leave it alone.

Refused mutations are recorded in the mutation log like any other failure.
Matching is done under the model lock, so a rule's count is exact even
with concurrent callers.
"""

import errno as errno_mod
import fnmatch
import itertools

from rdt_virt.emulator import kparse

OPS = ('mkdir', 'rmdir', 'write', 'read', 'rename')
# Operations whose kernel handler clears last_cmd_status on entry.
_CLEARS = ('write', 'rename')
# Operations that leave last_cmd_status untouched.
_SILENT = ('rmdir', 'read')


def errno_of(name):
    """The errno number for ``name`` (``'EIO'``) or a number."""
    if isinstance(name, int) and name in errno_mod.errorcode:
        return name
    code = getattr(errno_mod, str(name), None)
    if not str(name).startswith('E') or not isinstance(code, int):
        raise ValueError('unknown errno %r' % (name,))
    return code


class Rule(object):
    """One requested refusal."""

    def __init__(self, rule_id, op, pattern, err, count=1, skip=0,
                 status=None):
        if op not in OPS:
            raise ValueError('op must be one of %s, not %r'
                             % (', '.join(OPS), op))
        if not isinstance(pattern, str) or not pattern:
            raise ValueError('pattern must be a non-empty glob')
        self.id = rule_id
        self.op = op
        self.pattern = pattern if pattern.startswith('/') else (
            '/' + pattern)
        self.errno = errno_of(err)
        self.count = int(count)
        self.skip = int(skip)
        if self.count < 0 or self.skip < 0:
            raise ValueError('count and skip must not be negative')
        self.status = status or ''
        self.hits = 0          # calls refused so far
        self.seen = 0          # matching calls, refused or not

    def matches(self, op, path):
        return op == self.op and fnmatch.fnmatchcase(path, self.pattern)

    @property
    def spent(self):
        return self.count and self.hits >= self.count

    def describe(self):
        return {'id': self.id, 'op': self.op, 'pattern': self.pattern,
                'errno': errno_mod.errorcode[self.errno],
                'count': self.count, 'skip': self.skip,
                'status': self.status, 'hits': self.hits,
                'seen': self.seen}


class Faults(object):
    """The active rules of one emulator."""

    def __init__(self):
        self.rules = []
        self._ids = itertools.count(1)

    def add(self, op, pattern, errno, count=1, skip=0, status=None):
        """Refuse matching calls; returns the rule's description."""
        rule = Rule(next(self._ids), op, pattern, errno, count, skip,
                    status)
        self.rules.append(rule)
        return rule.describe()

    def describe(self):
        return [r.describe() for r in self.rules]

    def clear(self, rule_id=None):
        """Drop one rule (by id) or all; returns how many went."""
        before = len(self.rules)
        self.rules = [r for r in self.rules
                      if rule_id is not None and r.id != int(rule_id)]
        return before - len(self.rules)

    def _take(self, op, path):
        for rule in self.rules:
            if not rule.matches(op, path):
                continue
            rule.seen += 1
            if rule.seen <= rule.skip:
                continue
            rule.hits += 1
            if rule.spent:
                self.rules.remove(rule)
            return rule
        return None

    def check(self, model, op, path, data=None):
        """Raise KernelError if a rule refuses ``op`` on ``path``.

        :param model: the :class:`~rdt_virt.emulator.model.ResctrlModel`
            whose status and log a refusal updates.
        :param data: what a write carried or a rename's target, for the
            log.
        """
        if not self.rules:
            return
        path = '/' + path.strip('/')
        with model.lock:
            rule = self._take(op, path)
            if rule is None:
                return
            # info/ files (max_threshold_occupancy) do not use the status.
            if op not in _SILENT and not path.startswith('/info/'):
                if op in _CLEARS:
                    model._clear()
                model._puts(rule.status)
            if op != 'read':
                model.log.record(op, path, data, rule.errno,
                                 model.last_cmd_status)
        raise kparse.KernelError(rule.errno, rule.status)
