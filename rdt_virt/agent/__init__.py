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

"""rdt-virt-agent: keeps instances' threads in their resctrl groups and
samples their counters.

Pure logic apart from I/O:

``model``      desired instances, resctrl snapshots, actions, placements
``reconcile``  (desired, actual) -> actions; ``masks`` its value helpers
``rotation``   the RMID budget and the rotation of monitoring groups
``sampler``    rates from cumulative counters
``publish``    the host state document (``state`` writes and reads it)

I/O:

``desired``    a domain's XML -> its Instance (over rdt_virt.libvirt)
``domains``    libvirt: running Nova domains and their events
``procfs``     QEMU processes and their threads
``executor``   applies actions through rdt_virt.privsep
``service``    the Agent: ticks, the event fast path, samples, its loop
"""
