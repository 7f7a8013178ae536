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

"""Where the Nova releases rdt-virt supports (31 to 34) differ.

Each shim names the release it exists for: delete it when that release
leaves the support matrix (``doc/source/install/support-matrix.rst``).
Eventlet, which nova-compute runs on up to Nova 33, is handled by
:mod:`rdt_virt.concurrency`.
"""

from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects

from rdt_virt.libvirt import elements
from rdt_virt.policy import extra_specs


def domain_policy(domain_xml, uuid):
    """The RDTPolicy of the flavor a domain defined here runs with.

    Nova 32 (2025.2) and later record the flavor's extra specs in the
    domain's metadata. Nova 31 (2025.1) records only its name and sizes, so
    the extra specs come from the instance's record, which the conductor
    serves at any time nova-compute runs. Delete the fallback when 2025.1
    leaves the matrix.

    :returns: the policy, or None for a domain that is not an instance
        Nova knows.
    """
    specs = elements.flavor_extra_specs(domain_xml)
    if specs is None:
        try:
            instance = objects.Instance.get_by_uuid(
                nova_context.get_admin_context(), uuid,
                expected_attrs=['flavor'])
        except nova_exception.InstanceNotFound:
            return None
        specs = instance.flavor.extra_specs
    return extra_specs.from_extra_specs(specs)
