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

"""The methods RDTLibvirtDriver overrides, against the installed Nova.

Many are private to Nova's libvirt driver and may change in any Nova
release. This test states what the driver relies on: each method still
exists, and takes the parameters the override names, in the same places.
A Nova release that renames, reorders or drops one fails here, and in CI's
target for that release, before it reaches a compute host.
"""

import inspect

from nova.virt.libvirt import driver as libvirt_driver

from nova_plugin.virt import driver
from tests import base

# The overrides that the driver's lifecycle depends on (nova_plugin.virt.
# driver): a silent change of any of them would leave a claim behind or
# drop one.
OVERRIDDEN = (
    '_get_guest_config', 'prepare_for_spawn', 'spawn', '_hard_reboot',
    'rescue', 'unrescue', 'cleanup', 'migrate_disk_and_power_off',
    'finish_migration', 'confirm_migration', 'finish_revert_migration',
    'check_can_live_migrate_destination', '_live_migration_operation',
    'pre_live_migration', 'post_live_migration_at_destination',
    'rollback_live_migration_at_destination',
    'post_live_migration_at_source', 'init_host', 'get_available_resource',
    'update_provider_tree',
)


def named(fn):
    """The parameters a function names, in order, up to *args/**kwargs."""
    names = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            break
        names.append(p.name)
    return names


class TestOverrides(base.TestCase):

    def test_every_override_is_listed(self):
        # A new override joins OVERRIDDEN, so that it is checked too.
        own = {name for name, value in vars(driver.RDTLibvirtDriver).items()
               if callable(value) and hasattr(libvirt_driver.LibvirtDriver,
                                              name)}
        self.assertEqual(sorted(own - {'__init__'}), sorted(OVERRIDDEN))

    def test_nova_takes_what_the_overrides_pass(self):
        for name in OVERRIDDEN:
            ours = named(getattr(driver.RDTLibvirtDriver, name))
            novas = named(getattr(libvirt_driver.LibvirtDriver, name))
            self.assertEqual(novas[:len(ours)], ours,
                             'LibvirtDriver.%s changed its parameters' % name)
