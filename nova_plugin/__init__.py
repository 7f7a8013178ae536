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

"""Everything of rdt-virt that imports Nova.

* :mod:`nova_plugin.api.validators`: flavor extra spec validators
  (entry point ``nova.api.extra_spec_validators``);
* :mod:`nova_plugin.scheduler`: ``RDTFilter`` and ``RDTWeigher``;
* :mod:`nova_plugin.virt`: the RDT-aware libvirt driver, loaded by Nova
  through the ``nova.virt.rdtvirt`` loader package.

Nothing outside this package imports Nova, so the core library, the agent
and the telemetry plugins install and run without it.
"""
