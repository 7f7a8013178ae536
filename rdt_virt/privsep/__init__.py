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

"""The privileged side of rdt-virt, through oslo.privsep.

One context, :data:`sys_admin_pctxt`, runs the few entrypoints of
:mod:`rdt_virt.privsep.resctrl` as root in a separate daemon. Root is
needed because resctrl's files belong to root and the kernel lets only
root (or the thread's owner) move a thread between groups; the daemon
keeps ``CAP_SYS_ADMIN`` and ``CAP_DAC_OVERRIDE`` and drops every other
capability.

Its configuration section is ``[rdt_virt_privsep]`` (oslo.privsep's
``helper_command``, ``user``, ``group``, ``capabilities``, ...). Tests run
the entrypoints in-process with ``sys_admin_pctxt.set_client_mode(False)``.
"""

from oslo_privsep import capabilities as caps
from oslo_privsep import priv_context

# Importing rdt_virt.conf registers [rdt], which the daemon reads too.
from rdt_virt import conf  # noqa: F401

sys_admin_pctxt = priv_context.PrivContext(
    'rdt_virt',
    cfg_section='rdt_virt_privsep',
    pypath=__name__ + '.sys_admin_pctxt',
    capabilities=[caps.CAP_SYS_ADMIN, caps.CAP_DAC_OVERRIDE],
)
