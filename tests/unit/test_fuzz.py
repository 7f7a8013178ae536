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

"""The parsers of outside text under fuzzing (:mod:`tests.fuzz`).

Every corpus input and every past crasher is replayed through its target
with a time limit; then atheris runs each target for a bounded number of
inputs (``RDT_VIRT_FUZZ_RUNS``, 4000 by default; ``RDT_VIRT_FUZZ_SEED``)
from the committed corpus. ``tools/fuzz.sh`` runs longer.
"""

import os
import signal
import subprocess
import sys
import tempfile

from tests import base
from tests.fuzz import targets

FUZZ = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'fuzz')
REPO = os.path.dirname(os.path.dirname(FUZZ))
TIME_LIMIT = 2.0


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


class TestCorpus(base.TestCase):

    def replay(self, name):
        target = targets.TARGETS[name]
        count = 0
        for kind in ('corpus', 'crashers'):
            d = os.path.join(FUZZ, kind, name)
            if not os.path.isdir(d):
                continue
            for entry in sorted(os.listdir(d)):
                with open(os.path.join(d, entry), 'rb') as f:
                    data = f.read()
                old = signal.signal(signal.SIGALRM, _alarm)
                signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
                try:
                    targets.run_one(target, data)
                except Timeout:
                    self.fail('%s/%s/%s took over %ss' % (kind, name, entry,
                                                          TIME_LIMIT))
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    signal.signal(signal.SIGALRM, old)
                count += 1
        return count

    def test_every_target_has_a_corpus(self):
        for name in targets.TARGETS:
            self.assertTrue(os.listdir(os.path.join(FUZZ, 'corpus', name)),
                            name)

    def test_replay(self):
        for name in targets.TARGETS:
            self.assertGreater(self.replay(name), 0, name)

    def test_targets_refuse_what_they_must(self):
        # Undocumented exceptions go through; documented ones do not.
        self.assertIsNone(targets.run_one(targets.TARGETS['schemata'],
                                          b'L3:0=zz'))
        self.assertRaises(TypeError, targets.run_one,
                          targets.Target('x', lambda d: d + 1, (), '', ()),
                          b'')


class TestBoundedFuzzing(base.TestCase):
    """A few thousand atheris inputs per target, every run."""

    RUNS = int(os.environ.get('RDT_VIRT_FUZZ_RUNS', '4000'))
    SEED = int(os.environ.get('RDT_VIRT_FUZZ_SEED', '1'))

    def fuzz(self, name):
        try:
            import atheris  # noqa: F401
        except ImportError:
            self.require(False, 'atheris is not installed')
        work = tempfile.mkdtemp()
        corpus = os.path.join(work, 'corpus')
        os.mkdir(corpus)
        cmd = [sys.executable, '-m', 'tests.fuzz.run', name,
               '-runs=%d' % self.RUNS, '-seed=%d' % self.SEED,
               '-timeout=5', '-artifact_prefix=%s/' % work, corpus,
               os.path.join(FUZZ, 'corpus', name)]
        proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              timeout=300)
        found = [f for f in os.listdir(work) if f != 'corpus']
        if proc.returncode or found:
            details = []
            for f in found:
                with open(os.path.join(work, f), 'rb') as fh:
                    details.append('%s: %r' % (f, fh.read()[:500]))
            self.fail('fuzzing %s found a problem (seed %d):\n%s\n%s' % (
                name, self.SEED, '\n'.join(details), proc.stdout[-3000:]))
        self.assertIn('Done %d runs' % self.RUNS, proc.stdout)


def _fuzz_test(name):
    def test(self):
        self.fuzz(name)
    test.__name__ = 'test_%s' % name
    test.__doc__ = 'Fuzz %s.' % targets.TARGETS[name].about
    return test


for _name in targets.TARGETS:
    setattr(TestBoundedFuzzing, 'test_%s' % _name, _fuzz_test(_name))
