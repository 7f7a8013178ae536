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

"""The test cloud's flow makes the flavors an operator is advised to make.

Its flavor commands, recorded without a cloud, must pass the check of
``rdt-virt flavor-audit`` (:func:`rdt_virt.policy.placement.audit`).
"""

import fixtures

from rdt_virt.cloud import flow
from rdt_virt.policy import placement
from rdt_virt.sandbox import guest
from tests import base


class Recorder(object):
    """The parts of a Flow that flavors_and_images() uses."""

    def __init__(self, work):
        self.work = work
        self.commands = []

    def os(self, *args, **kwargs):
        self.commands.append([str(a) for a in args])
        if args[:2] == ('image', 'show') and kwargs.get('parse'):
            return {'status': 'active', 'size': guest.IMAGE_SIZE}
        return 0, ''

    def expect(self, ok, what):
        assert ok, what


def created_flavors(commands):
    """{name: extra specs} of the ``flavor create`` commands."""
    found = {}
    for args in commands:
        if args[:2] != ['flavor', 'create']:
            continue
        specs = {}
        for i, arg in enumerate(args):
            if arg == '--property':
                key, _, value = args[i + 1].partition('=')
                specs[key] = value
        found[args[-1]] = specs
    return found


class TestFlowFlavors(base.TestCase):

    def test_flavors_pass_the_audit(self):
        recorder = Recorder(self.useFixture(fixtures.TempDir()).path)
        flow.Flow.flavors_and_images(recorder)
        flavors = created_flavors(recorder.commands)
        self.assertEqual({'rdt.protected', 'rdt.noisy', 'rdt.protected4m'},
                         set(flavors))
        for name, specs in flavors.items():
            result = placement.audit(specs)
            self.assertTrue(result.ok, '%s: %s' % (name, result))
        self.assertEqual({'hw:mem_bw': '10',
                          'resources:CUSTOM_RDT_CLOSID': '1',
                          'trait:CUSTOM_RDT_MBA': 'required'},
                         flavors['rdt.noisy'])

    def test_priority_flavors_pass_the_audit(self):
        for _name, priority in flow.PRIORITY_FLAVORS:
            specs = flow.advised({'hw:rdt_priority': priority})
            result = placement.audit(specs)
            self.assertTrue(result.ok, specs)
            self.assertEqual({}, result.unneeded, specs)
            # A high server needs MBA; a low one runs anywhere.
            self.assertEqual('required' if priority == 'high' else None,
                             specs.get('trait:CUSTOM_RDT_MBA'))
