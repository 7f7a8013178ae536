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

"""Loader of rdt-virt's libvirt driver for nova-compute.

Nova imports ``compute_driver`` as ``'nova.virt.' + value``, so an
out-of-tree driver needs a module inside the ``nova.virt`` package. rdt-virt
installs this one there; in nova.conf::

    [DEFAULT]
    compute_driver = rdtvirt.RDTLibvirtDriver

It only re-exports :class:`nova_plugin.virt.driver.RDTLibvirtDriver`; keep
it that small, since ``rdt-virt-nova-loader install`` copies it into Nova's
package for installs that cannot place it there themselves.
"""

from nova_plugin.virt.driver import RDTLibvirtDriver

__all__ = ['RDTLibvirtDriver']
