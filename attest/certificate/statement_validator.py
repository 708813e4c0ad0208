"""Validator of attest/schemas/statement.schema.json: GENERATED, do not edit.

Written by ``python -m attest.certificate.schemas write`` (``make schemas``): the output of fastjsonschema's
``compile_to_code``, a library that compiles a JSON Schema to Python, so that the verifier
checks statements without importing the jsonschema stack at run time. tests/unit/
test_schemas.py regenerates it and fails on drift; tests/unit/verification/test_statement_validator.py
holds it against jsonschema on valid and invalid statements.
"""

# mypy: ignore-errors
# ruff: noqa
# fmt: off
VERSION = "2.22.3"
from decimal import Decimal
import re
from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException


REGEX_PATTERNS = {
    '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$': re.compile('^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*\\Z'),
    '^[0-9a-f]{64}$': re.compile('^[0-9a-f]{64}\\Z'),
    '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$': re.compile('^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z\\Z'),
    '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$': re.compile('^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?\\Z')
}

NoneType = type(None)

def validate(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'$defs': {'CollectorRef': {'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, 'DeploymentEnvelope': {'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, 'DigestSet': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'EvidenceProvenance': {'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, 'ModelCard': {'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, 'ModelIdentity': {'additionalProperties': False, 'properties': {'card': {'anyOf': [{'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, 'PolicyRef': {'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, 'Predicate': {'additionalProperties': False, 'properties': {'certificate_id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'checks': {'additionalProperties': True, 'type': 'object'}, 'deployment': {'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'$ref': '#/$defs/TargetEnvelope'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, 'environment': {'additionalProperties': True, 'type': 'object'}, 'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_provenance': {'additionalProperties': {'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'$ref': '#/$defs/CollectorRef'}, {'type': 'null'}]}, 'evidence_digest': {'$ref': '#/$defs/DigestSet'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, 'type': 'object'}, 'expires_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'extensions': {'additionalProperties': True, 'type': 'object'}, 'findings': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'folders': {'additionalProperties': {'additionalProperties': True, 'type': 'object'}, 'type': 'object'}, 'issued_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'model': {'additionalProperties': False, 'properties': {'card': {'anyOf': [{'$ref': '#/$defs/ModelCard'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, 'model_metrics': {'additionalProperties': True, 'type': 'object'}, 'modules': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'onnx_mapping': {'additionalProperties': True, 'type': 'object'}, 'operators': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'policy': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, 'tool': {'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}, 'waivers': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}}, 'required': ['certificate_id', 'model', 'issued_at', 'expires_at', 'verdict', 'policy'], 'type': 'object'}, 'Subject': {'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, 'TargetEnvelope': {'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, 'ToolInfo': {'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}}, 'additionalProperties': False, 'properties': {'_type': {'const': 'https://in-toto.io/Statement/v1', 'type': 'string'}, 'predicate': {'additionalProperties': False, 'properties': {'certificate_id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'checks': {'additionalProperties': True, 'type': 'object'}, 'deployment': {'$ref': '#/$defs/DeploymentEnvelope'}, 'environment': {'additionalProperties': True, 'type': 'object'}, 'evidence_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}, 'evidence_provenance': {'additionalProperties': {'$ref': '#/$defs/EvidenceProvenance'}, 'type': 'object'}, 'expires_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'extensions': {'additionalProperties': True, 'type': 'object'}, 'findings': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'folders': {'additionalProperties': {'additionalProperties': True, 'type': 'object'}, 'type': 'object'}, 'issued_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'model': {'$ref': '#/$defs/ModelIdentity'}, 'model_metrics': {'additionalProperties': True, 'type': 'object'}, 'modules': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'onnx_mapping': {'additionalProperties': True, 'type': 'object'}, 'operators': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'policy': {'$ref': '#/$defs/PolicyRef'}, 'tool': {'$ref': '#/$defs/ToolInfo'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}, 'waivers': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}}, 'required': ['certificate_id', 'model', 'issued_at', 'expires_at', 'verdict', 'policy'], 'type': 'object'}, 'predicateType': {'const': 'https://gradient-attest.dev/certificate/v1', 'type': 'string'}, 'subject': {'items': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, 'minItems': 1, 'type': 'array'}}, 'required': ['subject', 'predicate'], 'type': 'object', '$schema': 'https://json-schema.org/draft/2019-09/schema'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['subject', 'predicate']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain " + (str(sorted(data__missing_keys)) + " properties"), value=data, name="" + (name_prefix or "data") + "", definition={'$defs': {'CollectorRef': {'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, 'DeploymentEnvelope': {'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, 'DigestSet': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'EvidenceProvenance': {'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, 'ModelCard': {'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, 'ModelIdentity': {'additionalProperties': False, 'properties': {'card': {'anyOf': [{'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, 'PolicyRef': {'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, 'Predicate': {'additionalProperties': False, 'properties': {'certificate_id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'checks': {'additionalProperties': True, 'type': 'object'}, 'deployment': {'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'$ref': '#/$defs/TargetEnvelope'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, 'environment': {'additionalProperties': True, 'type': 'object'}, 'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_provenance': {'additionalProperties': {'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'$ref': '#/$defs/CollectorRef'}, {'type': 'null'}]}, 'evidence_digest': {'$ref': '#/$defs/DigestSet'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, 'type': 'object'}, 'expires_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'extensions': {'additionalProperties': True, 'type': 'object'}, 'findings': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'folders': {'additionalProperties': {'additionalProperties': True, 'type': 'object'}, 'type': 'object'}, 'issued_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'model': {'additionalProperties': False, 'properties': {'card': {'anyOf': [{'$ref': '#/$defs/ModelCard'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, 'model_metrics': {'additionalProperties': True, 'type': 'object'}, 'modules': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'onnx_mapping': {'additionalProperties': True, 'type': 'object'}, 'operators': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'policy': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, 'tool': {'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}, 'waivers': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}}, 'required': ['certificate_id', 'model', 'issued_at', 'expires_at', 'verdict', 'policy'], 'type': 'object'}, 'Subject': {'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, 'TargetEnvelope': {'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, 'ToolInfo': {'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}}, 'additionalProperties': False, 'properties': {'_type': {'const': 'https://in-toto.io/Statement/v1', 'type': 'string'}, 'predicate': {'additionalProperties': False, 'properties': {'certificate_id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'checks': {'additionalProperties': True, 'type': 'object'}, 'deployment': {'$ref': '#/$defs/DeploymentEnvelope'}, 'environment': {'additionalProperties': True, 'type': 'object'}, 'evidence_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}, 'evidence_provenance': {'additionalProperties': {'$ref': '#/$defs/EvidenceProvenance'}, 'type': 'object'}, 'expires_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'extensions': {'additionalProperties': True, 'type': 'object'}, 'findings': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'folders': {'additionalProperties': {'additionalProperties': True, 'type': 'object'}, 'type': 'object'}, 'issued_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'model': {'$ref': '#/$defs/ModelIdentity'}, 'model_metrics': {'additionalProperties': True, 'type': 'object'}, 'modules': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'onnx_mapping': {'additionalProperties': True, 'type': 'object'}, 'operators': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'policy': {'$ref': '#/$defs/PolicyRef'}, 'tool': {'$ref': '#/$defs/ToolInfo'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}, 'waivers': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}}, 'required': ['certificate_id', 'model', 'issued_at', 'expires_at', 'verdict', 'policy'], 'type': 'object'}, 'predicateType': {'const': 'https://gradient-attest.dev/certificate/v1', 'type': 'string'}, 'subject': {'items': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, 'minItems': 1, 'type': 'array'}}, 'required': ['subject', 'predicate'], 'type': 'object', '$schema': 'https://json-schema.org/draft/2019-09/schema'}, rule='required')
        data_keys = set(data.keys())
        if "_type" in data_keys:
            data_keys.remove("_type")
            data__type = data["_type"]
            if not isinstance(data__type, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + "._type must be string", value=data__type, name="" + (name_prefix or "data") + "._type", definition={'const': 'https://in-toto.io/Statement/v1', 'type': 'string'}, rule='type')
            if not (isinstance(data__type, str) and data__type == 'https://in-toto.io/Statement/v1'):
                raise JsonSchemaValueException("" + (name_prefix or "data") + "._type must be same as const definition: https://in-toto.io/Statement/v1", value=data__type, name="" + (name_prefix or "data") + "._type", definition={'const': 'https://in-toto.io/Statement/v1', 'type': 'string'}, rule='const')
        if "predicate" in data_keys:
            data_keys.remove("predicate")
            data__predicate = data["predicate"]
            validate____defs_predicate(data__predicate, custom_formats, (name_prefix or "data") + ".predicate")
        if "predicateType" in data_keys:
            data_keys.remove("predicateType")
            data__predicateType = data["predicateType"]
            if not isinstance(data__predicateType, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".predicateType must be string", value=data__predicateType, name="" + (name_prefix or "data") + ".predicateType", definition={'const': 'https://gradient-attest.dev/certificate/v1', 'type': 'string'}, rule='type')
            if not (isinstance(data__predicateType, str) and data__predicateType == 'https://gradient-attest.dev/certificate/v1'):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".predicateType must be same as const definition: https://gradient-attest.dev/certificate/v1", value=data__predicateType, name="" + (name_prefix or "data") + ".predicateType", definition={'const': 'https://gradient-attest.dev/certificate/v1', 'type': 'string'}, rule='const')
        if "subject" in data_keys:
            data_keys.remove("subject")
            data__subject = data["subject"]
            if not isinstance(data__subject, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".subject must be array", value=data__subject, name="" + (name_prefix or "data") + ".subject", definition={'items': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, 'minItems': 1, 'type': 'array'}, rule='type')
            data__subject_is_list = isinstance(data__subject, (list, tuple))
            if data__subject_is_list:
                data__subject_len = len(data__subject)
                if data__subject_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".subject must contain at least 1 items", value=data__subject, name="" + (name_prefix or "data") + ".subject", definition={'items': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, 'minItems': 1, 'type': 'array'}, rule='minItems')
                for data__subject_x, data__subject_item in enumerate(data__subject):
                    validate____defs_subject(data__subject_item, custom_formats, (name_prefix or "data") + ".subject[{data__subject_x}]".format(**locals()))
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'$defs': {'CollectorRef': {'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, 'DeploymentEnvelope': {'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, 'DigestSet': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'EvidenceProvenance': {'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, 'ModelCard': {'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, 'ModelIdentity': {'additionalProperties': False, 'properties': {'card': {'anyOf': [{'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, 'PolicyRef': {'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, 'Predicate': {'additionalProperties': False, 'properties': {'certificate_id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'checks': {'additionalProperties': True, 'type': 'object'}, 'deployment': {'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'$ref': '#/$defs/TargetEnvelope'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, 'environment': {'additionalProperties': True, 'type': 'object'}, 'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_provenance': {'additionalProperties': {'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'$ref': '#/$defs/CollectorRef'}, {'type': 'null'}]}, 'evidence_digest': {'$ref': '#/$defs/DigestSet'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, 'type': 'object'}, 'expires_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'extensions': {'additionalProperties': True, 'type': 'object'}, 'findings': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'folders': {'additionalProperties': {'additionalProperties': True, 'type': 'object'}, 'type': 'object'}, 'issued_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'model': {'additionalProperties': False, 'properties': {'card': {'anyOf': [{'$ref': '#/$defs/ModelCard'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, 'model_metrics': {'additionalProperties': True, 'type': 'object'}, 'modules': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'onnx_mapping': {'additionalProperties': True, 'type': 'object'}, 'operators': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'policy': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, 'tool': {'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}, 'waivers': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}}, 'required': ['certificate_id', 'model', 'issued_at', 'expires_at', 'verdict', 'policy'], 'type': 'object'}, 'Subject': {'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, 'TargetEnvelope': {'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, 'ToolInfo': {'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}}, 'additionalProperties': False, 'properties': {'_type': {'const': 'https://in-toto.io/Statement/v1', 'type': 'string'}, 'predicate': {'additionalProperties': False, 'properties': {'certificate_id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'checks': {'additionalProperties': True, 'type': 'object'}, 'deployment': {'$ref': '#/$defs/DeploymentEnvelope'}, 'environment': {'additionalProperties': True, 'type': 'object'}, 'evidence_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}, 'evidence_provenance': {'additionalProperties': {'$ref': '#/$defs/EvidenceProvenance'}, 'type': 'object'}, 'expires_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'extensions': {'additionalProperties': True, 'type': 'object'}, 'findings': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'folders': {'additionalProperties': {'additionalProperties': True, 'type': 'object'}, 'type': 'object'}, 'issued_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'model': {'$ref': '#/$defs/ModelIdentity'}, 'model_metrics': {'additionalProperties': True, 'type': 'object'}, 'modules': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'onnx_mapping': {'additionalProperties': True, 'type': 'object'}, 'operators': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'policy': {'$ref': '#/$defs/PolicyRef'}, 'tool': {'$ref': '#/$defs/ToolInfo'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}, 'waivers': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}}, 'required': ['certificate_id', 'model', 'issued_at', 'expires_at', 'verdict', 'policy'], 'type': 'object'}, 'predicateType': {'const': 'https://gradient-attest.dev/certificate/v1', 'type': 'string'}, 'subject': {'items': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, 'minItems': 1, 'type': 'array'}}, 'required': ['subject', 'predicate'], 'type': 'object', '$schema': 'https://json-schema.org/draft/2019-09/schema'}, rule='additionalProperties')
    return data

def validate____defs_subject(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['name', 'digest']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain " + (str(sorted(data__missing_keys)) + " properties"), value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, rule='required')
        data_keys = set(data.keys())
        if "digest" in data_keys:
            data_keys.remove("digest")
            data__digest = data["digest"]
            validate____defs_digestset(data__digest, custom_formats, (name_prefix or "data") + ".digest")
        if "name" in data_keys:
            data_keys.remove("name")
            data__name = data["name"]
            if not isinstance(data__name, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be string", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}, rule='type')
            if isinstance(data__name, str):
                data__name_len = len(data__name)
                if data__name_len > 4096:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be shorter than or equal to 4096 characters", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}, rule='maxLength')
                if not REGEX_PATTERNS['^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$'].search(data__name):
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must match pattern ^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}, rule='pattern')
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'name': {'maxLength': 4096, 'pattern': '^(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+)(?:/(?:[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.[^/\\\\\\u0000-\\u001f\\u007f.][^/\\\\\\u0000-\\u001f\\u007f]*|\\.\\.[^/\\\\\\u0000-\\u001f\\u007f]+))*$', 'type': 'string'}}, 'required': ['name', 'digest'], 'type': 'object'}, rule='additionalProperties')
    return data

def validate____defs_digestset(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['sha256']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain " + (str(sorted(data__missing_keys)) + " properties"), value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, rule='required')
        data_keys = set(data.keys())
        if "sha256" in data_keys:
            data_keys.remove("sha256")
            data__sha256 = data["sha256"]
            if not isinstance(data__sha256, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".sha256 must be string", value=data__sha256, name="" + (name_prefix or "data") + ".sha256", definition={'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, rule='type')
            if isinstance(data__sha256, str):
                if not REGEX_PATTERNS['^[0-9a-f]{64}$'].search(data__sha256):
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".sha256 must match pattern ^[0-9a-f]{64}$", value=data__sha256, name="" + (name_prefix or "data") + ".sha256", definition={'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, rule='pattern')
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, rule='additionalProperties')
    return data

def validate____defs_predicate(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'certificate_id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'checks': {'additionalProperties': True, 'type': 'object'}, 'deployment': {'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'$ref': '#/$defs/TargetEnvelope'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, 'environment': {'additionalProperties': True, 'type': 'object'}, 'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_provenance': {'additionalProperties': {'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'$ref': '#/$defs/CollectorRef'}, {'type': 'null'}]}, 'evidence_digest': {'$ref': '#/$defs/DigestSet'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, 'type': 'object'}, 'expires_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'extensions': {'additionalProperties': True, 'type': 'object'}, 'findings': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'folders': {'additionalProperties': {'additionalProperties': True, 'type': 'object'}, 'type': 'object'}, 'issued_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'model': {'additionalProperties': False, 'properties': {'card': {'anyOf': [{'$ref': '#/$defs/ModelCard'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, 'model_metrics': {'additionalProperties': True, 'type': 'object'}, 'modules': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'onnx_mapping': {'additionalProperties': True, 'type': 'object'}, 'operators': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'policy': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, 'tool': {'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}, 'waivers': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}}, 'required': ['certificate_id', 'model', 'issued_at', 'expires_at', 'verdict', 'policy'], 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['certificate_id', 'model', 'issued_at', 'expires_at', 'verdict', 'policy']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain " + (str(sorted(data__missing_keys)) + " properties"), value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'certificate_id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'checks': {'additionalProperties': True, 'type': 'object'}, 'deployment': {'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'$ref': '#/$defs/TargetEnvelope'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, 'environment': {'additionalProperties': True, 'type': 'object'}, 'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_provenance': {'additionalProperties': {'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'$ref': '#/$defs/CollectorRef'}, {'type': 'null'}]}, 'evidence_digest': {'$ref': '#/$defs/DigestSet'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, 'type': 'object'}, 'expires_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'extensions': {'additionalProperties': True, 'type': 'object'}, 'findings': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'folders': {'additionalProperties': {'additionalProperties': True, 'type': 'object'}, 'type': 'object'}, 'issued_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'model': {'additionalProperties': False, 'properties': {'card': {'anyOf': [{'$ref': '#/$defs/ModelCard'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, 'model_metrics': {'additionalProperties': True, 'type': 'object'}, 'modules': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'onnx_mapping': {'additionalProperties': True, 'type': 'object'}, 'operators': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'policy': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, 'tool': {'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}, 'waivers': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}}, 'required': ['certificate_id', 'model', 'issued_at', 'expires_at', 'verdict', 'policy'], 'type': 'object'}, rule='required')
        data_keys = set(data.keys())
        if "certificate_id" in data_keys:
            data_keys.remove("certificate_id")
            data__certificateid = data["certificate_id"]
            if not isinstance(data__certificateid, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate_id must be string", value=data__certificateid, name="" + (name_prefix or "data") + ".certificate_id", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
            if isinstance(data__certificateid, str):
                data__certificateid_len = len(data__certificateid)
                if data__certificateid_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate_id must be longer than or equal to 1 characters", value=data__certificateid, name="" + (name_prefix or "data") + ".certificate_id", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                if data__certificateid_len > 256:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate_id must be shorter than or equal to 256 characters", value=data__certificateid, name="" + (name_prefix or "data") + ".certificate_id", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if "checks" in data_keys:
            data_keys.remove("checks")
            data__checks = data["checks"]
            if not isinstance(data__checks, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".checks must be object", value=data__checks, name="" + (name_prefix or "data") + ".checks", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
            data__checks_is_dict = isinstance(data__checks, dict)
            if data__checks_is_dict:
                data__checks_keys = set(data__checks.keys())
        if "deployment" in data_keys:
            data_keys.remove("deployment")
            data__deployment = data["deployment"]
            validate____defs_deploymentenvelope(data__deployment, custom_formats, (name_prefix or "data") + ".deployment")
        if "environment" in data_keys:
            data_keys.remove("environment")
            data__environment = data["environment"]
            if not isinstance(data__environment, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".environment must be object", value=data__environment, name="" + (name_prefix or "data") + ".environment", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
            data__environment_is_dict = isinstance(data__environment, dict)
            if data__environment_is_dict:
                data__environment_keys = set(data__environment.keys())
        if "evidence_digest" in data_keys:
            data_keys.remove("evidence_digest")
            data__evidencedigest = data["evidence_digest"]
            data__evidencedigest_any_of_count1 = 0
            if not data__evidencedigest_any_of_count1:
                try:
                    validate____defs_digestset(data__evidencedigest, custom_formats, (name_prefix or "data") + ".evidence_digest")
                    data__evidencedigest_any_of_count1 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__evidencedigest_any_of_count1:
                try:
                    if not isinstance(data__evidencedigest, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".evidence_digest must be null", value=data__evidencedigest, name="" + (name_prefix or "data") + ".evidence_digest", definition={'type': 'null'}, rule='type')
                    data__evidencedigest_any_of_count1 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__evidencedigest_any_of_count1:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".evidence_digest cannot be validated by any definition", value=data__evidencedigest, name="" + (name_prefix or "data") + ".evidence_digest", definition={'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, rule='anyOf')
        if "evidence_provenance" in data_keys:
            data_keys.remove("evidence_provenance")
            data__evidenceprovenance = data["evidence_provenance"]
            if not isinstance(data__evidenceprovenance, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".evidence_provenance must be object", value=data__evidenceprovenance, name="" + (name_prefix or "data") + ".evidence_provenance", definition={'additionalProperties': {'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'$ref': '#/$defs/CollectorRef'}, {'type': 'null'}]}, 'evidence_digest': {'$ref': '#/$defs/DigestSet'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, 'type': 'object'}, rule='type')
            data__evidenceprovenance_is_dict = isinstance(data__evidenceprovenance, dict)
            if data__evidenceprovenance_is_dict:
                data__evidenceprovenance_keys = set(data__evidenceprovenance.keys())
                for data__evidenceprovenance_key in data__evidenceprovenance_keys:
                    if data__evidenceprovenance_key not in []:
                        data__evidenceprovenance_value = data__evidenceprovenance.get(data__evidenceprovenance_key)
                        validate____defs_evidenceprovenance(data__evidenceprovenance_value, custom_formats, (name_prefix or "data") + ".evidence_provenance.{data__evidenceprovenance_key}".format(**locals()))
        if "expires_at" in data_keys:
            data_keys.remove("expires_at")
            data__expiresat = data["expires_at"]
            if not isinstance(data__expiresat, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".expires_at must be string", value=data__expiresat, name="" + (name_prefix or "data") + ".expires_at", definition={'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, rule='type')
            if isinstance(data__expiresat, str):
                if not REGEX_PATTERNS['^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$'].search(data__expiresat):
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".expires_at must match pattern ^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$", value=data__expiresat, name="" + (name_prefix or "data") + ".expires_at", definition={'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, rule='pattern')
        if "extensions" in data_keys:
            data_keys.remove("extensions")
            data__extensions = data["extensions"]
            if not isinstance(data__extensions, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".extensions must be object", value=data__extensions, name="" + (name_prefix or "data") + ".extensions", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
            data__extensions_is_dict = isinstance(data__extensions, dict)
            if data__extensions_is_dict:
                data__extensions_keys = set(data__extensions.keys())
        if "findings" in data_keys:
            data_keys.remove("findings")
            data__findings = data["findings"]
            if not isinstance(data__findings, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".findings must be array", value=data__findings, name="" + (name_prefix or "data") + ".findings", definition={'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, rule='type')
            data__findings_is_list = isinstance(data__findings, (list, tuple))
            if data__findings_is_list:
                data__findings_len = len(data__findings)
                for data__findings_x, data__findings_item in enumerate(data__findings):
                    if not isinstance(data__findings_item, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".findings[{data__findings_x}]".format(**locals()) + " must be object", value=data__findings_item, name="" + (name_prefix or "data") + ".findings[{data__findings_x}]".format(**locals()) + "", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
                    data__findings_item_is_dict = isinstance(data__findings_item, dict)
                    if data__findings_item_is_dict:
                        data__findings_item_keys = set(data__findings_item.keys())
        if "folders" in data_keys:
            data_keys.remove("folders")
            data__folders = data["folders"]
            if not isinstance(data__folders, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".folders must be object", value=data__folders, name="" + (name_prefix or "data") + ".folders", definition={'additionalProperties': {'additionalProperties': True, 'type': 'object'}, 'type': 'object'}, rule='type')
            data__folders_is_dict = isinstance(data__folders, dict)
            if data__folders_is_dict:
                data__folders_keys = set(data__folders.keys())
                for data__folders_key in data__folders_keys:
                    if data__folders_key not in []:
                        data__folders_value = data__folders.get(data__folders_key)
                        if not isinstance(data__folders_value, (dict)):
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".folders.{data__folders_key}".format(**locals()) + " must be object", value=data__folders_value, name="" + (name_prefix or "data") + ".folders.{data__folders_key}".format(**locals()) + "", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
                        data__folders_value_is_dict = isinstance(data__folders_value, dict)
                        if data__folders_value_is_dict:
                            data__folders_value_keys = set(data__folders_value.keys())
        if "issued_at" in data_keys:
            data_keys.remove("issued_at")
            data__issuedat = data["issued_at"]
            if not isinstance(data__issuedat, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".issued_at must be string", value=data__issuedat, name="" + (name_prefix or "data") + ".issued_at", definition={'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, rule='type')
            if isinstance(data__issuedat, str):
                if not REGEX_PATTERNS['^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$'].search(data__issuedat):
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".issued_at must match pattern ^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$", value=data__issuedat, name="" + (name_prefix or "data") + ".issued_at", definition={'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, rule='pattern')
        if "model" in data_keys:
            data_keys.remove("model")
            data__model = data["model"]
            validate____defs_modelidentity(data__model, custom_formats, (name_prefix or "data") + ".model")
        if "model_metrics" in data_keys:
            data_keys.remove("model_metrics")
            data__modelmetrics = data["model_metrics"]
            if not isinstance(data__modelmetrics, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".model_metrics must be object", value=data__modelmetrics, name="" + (name_prefix or "data") + ".model_metrics", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
            data__modelmetrics_is_dict = isinstance(data__modelmetrics, dict)
            if data__modelmetrics_is_dict:
                data__modelmetrics_keys = set(data__modelmetrics.keys())
        if "modules" in data_keys:
            data_keys.remove("modules")
            data__modules = data["modules"]
            if not isinstance(data__modules, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".modules must be array", value=data__modules, name="" + (name_prefix or "data") + ".modules", definition={'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, rule='type')
            data__modules_is_list = isinstance(data__modules, (list, tuple))
            if data__modules_is_list:
                data__modules_len = len(data__modules)
                for data__modules_x, data__modules_item in enumerate(data__modules):
                    if not isinstance(data__modules_item, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".modules[{data__modules_x}]".format(**locals()) + " must be object", value=data__modules_item, name="" + (name_prefix or "data") + ".modules[{data__modules_x}]".format(**locals()) + "", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
                    data__modules_item_is_dict = isinstance(data__modules_item, dict)
                    if data__modules_item_is_dict:
                        data__modules_item_keys = set(data__modules_item.keys())
        if "onnx_mapping" in data_keys:
            data_keys.remove("onnx_mapping")
            data__onnxmapping = data["onnx_mapping"]
            if not isinstance(data__onnxmapping, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".onnx_mapping must be object", value=data__onnxmapping, name="" + (name_prefix or "data") + ".onnx_mapping", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
            data__onnxmapping_is_dict = isinstance(data__onnxmapping, dict)
            if data__onnxmapping_is_dict:
                data__onnxmapping_keys = set(data__onnxmapping.keys())
        if "operators" in data_keys:
            data_keys.remove("operators")
            data__operators = data["operators"]
            if not isinstance(data__operators, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".operators must be array", value=data__operators, name="" + (name_prefix or "data") + ".operators", definition={'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, rule='type')
            data__operators_is_list = isinstance(data__operators, (list, tuple))
            if data__operators_is_list:
                data__operators_len = len(data__operators)
                for data__operators_x, data__operators_item in enumerate(data__operators):
                    if not isinstance(data__operators_item, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".operators[{data__operators_x}]".format(**locals()) + " must be object", value=data__operators_item, name="" + (name_prefix or "data") + ".operators[{data__operators_x}]".format(**locals()) + "", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
                    data__operators_item_is_dict = isinstance(data__operators_item, dict)
                    if data__operators_item_is_dict:
                        data__operators_item_keys = set(data__operators_item.keys())
        if "policy" in data_keys:
            data_keys.remove("policy")
            data__policy = data["policy"]
            validate____defs_policyref(data__policy, custom_formats, (name_prefix or "data") + ".policy")
        if "tool" in data_keys:
            data_keys.remove("tool")
            data__tool = data["tool"]
            validate____defs_toolinfo(data__tool, custom_formats, (name_prefix or "data") + ".tool")
        if "verdict" in data_keys:
            data_keys.remove("verdict")
            data__verdict = data["verdict"]
            if not isinstance(data__verdict, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".verdict must be string", value=data__verdict, name="" + (name_prefix or "data") + ".verdict", definition={'enum': ['pass', 'fail'], 'type': 'string'}, rule='type')
            if not (isinstance(data__verdict, str) and data__verdict == 'pass' or isinstance(data__verdict, str) and data__verdict == 'fail'):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".verdict must be one of ['pass', 'fail']", value=data__verdict, name="" + (name_prefix or "data") + ".verdict", definition={'enum': ['pass', 'fail'], 'type': 'string'}, rule='enum')
        if "waivers" in data_keys:
            data_keys.remove("waivers")
            data__waivers = data["waivers"]
            if not isinstance(data__waivers, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers must be array", value=data__waivers, name="" + (name_prefix or "data") + ".waivers", definition={'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, rule='type')
            data__waivers_is_list = isinstance(data__waivers, (list, tuple))
            if data__waivers_is_list:
                data__waivers_len = len(data__waivers)
                for data__waivers_x, data__waivers_item in enumerate(data__waivers):
                    if not isinstance(data__waivers_item, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}]".format(**locals()) + " must be object", value=data__waivers_item, name="" + (name_prefix or "data") + ".waivers[{data__waivers_x}]".format(**locals()) + "", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
                    data__waivers_item_is_dict = isinstance(data__waivers_item, dict)
                    if data__waivers_item_is_dict:
                        data__waivers_item_keys = set(data__waivers_item.keys())
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'certificate_id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'checks': {'additionalProperties': True, 'type': 'object'}, 'deployment': {'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'$ref': '#/$defs/TargetEnvelope'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, 'environment': {'additionalProperties': True, 'type': 'object'}, 'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_provenance': {'additionalProperties': {'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'$ref': '#/$defs/CollectorRef'}, {'type': 'null'}]}, 'evidence_digest': {'$ref': '#/$defs/DigestSet'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, 'type': 'object'}, 'expires_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'extensions': {'additionalProperties': True, 'type': 'object'}, 'findings': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'folders': {'additionalProperties': {'additionalProperties': True, 'type': 'object'}, 'type': 'object'}, 'issued_at': {'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, 'model': {'additionalProperties': False, 'properties': {'card': {'anyOf': [{'$ref': '#/$defs/ModelCard'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, 'model_metrics': {'additionalProperties': True, 'type': 'object'}, 'modules': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'onnx_mapping': {'additionalProperties': True, 'type': 'object'}, 'operators': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}, 'policy': {'additionalProperties': False, 'properties': {'digest': {'$ref': '#/$defs/DigestSet'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, 'tool': {'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}, 'waivers': {'items': {'additionalProperties': True, 'type': 'object'}, 'type': 'array'}}, 'required': ['certificate_id', 'model', 'issued_at', 'expires_at', 'verdict', 'policy'], 'type': 'object'}, rule='additionalProperties')
    return data

def validate____defs_toolinfo(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data_keys = set(data.keys())
        if "name" in data_keys:
            data_keys.remove("name")
            data__name = data["name"]
            if not isinstance(data__name, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be string", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
            if isinstance(data__name, str):
                data__name_len = len(data__name)
                if data__name_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be longer than or equal to 1 characters", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                if data__name_len > 256:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be shorter than or equal to 256 characters", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if "version" in data_keys:
            data_keys.remove("version")
            data__version = data["version"]
            if not isinstance(data__version, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be string", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
            if isinstance(data__version, str):
                data__version_len = len(data__version)
                if data__version_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be longer than or equal to 1 characters", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                if data__version_len > 256:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be shorter than or equal to 256 characters", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'type': 'object'}, rule='additionalProperties')
    return data

def validate____defs_policyref(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['id', 'version', 'digest']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain " + (str(sorted(data__missing_keys)) + " properties"), value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, rule='required')
        data_keys = set(data.keys())
        if "digest" in data_keys:
            data_keys.remove("digest")
            data__digest = data["digest"]
            validate____defs_digestset(data__digest, custom_formats, (name_prefix or "data") + ".digest")
        if "id" in data_keys:
            data_keys.remove("id")
            data__id = data["id"]
            if not isinstance(data__id, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".id must be string", value=data__id, name="" + (name_prefix or "data") + ".id", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
            if isinstance(data__id, str):
                data__id_len = len(data__id)
                if data__id_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".id must be longer than or equal to 1 characters", value=data__id, name="" + (name_prefix or "data") + ".id", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                if data__id_len > 256:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".id must be shorter than or equal to 256 characters", value=data__id, name="" + (name_prefix or "data") + ".id", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if "version" in data_keys:
            data_keys.remove("version")
            data__version = data["version"]
            if not isinstance(data__version, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be string", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
            if isinstance(data__version, str):
                data__version_len = len(data__version)
                if data__version_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be longer than or equal to 1 characters", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                if data__version_len > 256:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be shorter than or equal to 256 characters", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'id': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['id', 'version', 'digest'], 'type': 'object'}, rule='additionalProperties')
    return data

def validate____defs_modelidentity(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'card': {'anyOf': [{'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['name', 'version']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain " + (str(sorted(data__missing_keys)) + " properties"), value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'card': {'anyOf': [{'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, rule='required')
        data_keys = set(data.keys())
        if "card" in data_keys:
            data_keys.remove("card")
            data__card = data["card"]
            data__card_any_of_count2 = 0
            if not data__card_any_of_count2:
                try:
                    validate____defs_modelcard(data__card, custom_formats, (name_prefix or "data") + ".card")
                    data__card_any_of_count2 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__card_any_of_count2:
                try:
                    if not isinstance(data__card, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".card must be null", value=data__card, name="" + (name_prefix or "data") + ".card", definition={'type': 'null'}, rule='type')
                    data__card_any_of_count2 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__card_any_of_count2:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".card cannot be validated by any definition", value=data__card, name="" + (name_prefix or "data") + ".card", definition={'anyOf': [{'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, {'type': 'null'}]}, rule='anyOf')
        if "name" in data_keys:
            data_keys.remove("name")
            data__name = data["name"]
            if not isinstance(data__name, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be string", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
            if isinstance(data__name, str):
                data__name_len = len(data__name)
                if data__name_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be longer than or equal to 1 characters", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                if data__name_len > 256:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be shorter than or equal to 256 characters", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if "version" in data_keys:
            data_keys.remove("version")
            data__version = data["version"]
            if not isinstance(data__version, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be string", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}, rule='type')
            if isinstance(data__version, str):
                data__version_len = len(data__version)
                if data__version_len > 128:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be shorter than or equal to 128 characters", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}, rule='maxLength')
                if not REGEX_PATTERNS['^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$'].search(data__version):
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must match pattern ^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}, rule='pattern')
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'card': {'anyOf': [{'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, {'type': 'null'}]}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'version': {'maxLength': 128, 'pattern': '^\\d+(?:\\.\\d+)*(?:-[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$', 'type': 'string'}}, 'required': ['name', 'version'], 'type': 'object'}, rule='additionalProperties')
    return data

def validate____defs_modelcard(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['format']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain " + (str(sorted(data__missing_keys)) + " properties"), value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, rule='required')
        data_keys = set(data.keys())
        if "architecture" in data_keys:
            data_keys.remove("architecture")
            data__architecture = data["architecture"]
            data__architecture_any_of_count3 = 0
            if not data__architecture_any_of_count3:
                try:
                    if not isinstance(data__architecture, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".architecture must be string", value=data__architecture, name="" + (name_prefix or "data") + ".architecture", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__architecture, str):
                        data__architecture_len = len(data__architecture)
                        if data__architecture_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".architecture must be longer than or equal to 1 characters", value=data__architecture, name="" + (name_prefix or "data") + ".architecture", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__architecture_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".architecture must be shorter than or equal to 256 characters", value=data__architecture, name="" + (name_prefix or "data") + ".architecture", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__architecture_any_of_count3 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__architecture_any_of_count3:
                try:
                    if not isinstance(data__architecture, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".architecture must be null", value=data__architecture, name="" + (name_prefix or "data") + ".architecture", definition={'type': 'null'}, rule='type')
                    data__architecture_any_of_count3 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__architecture_any_of_count3:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".architecture cannot be validated by any definition", value=data__architecture, name="" + (name_prefix or "data") + ".architecture", definition={'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "authors" in data_keys:
            data_keys.remove("authors")
            data__authors = data["authors"]
            data__authors_any_of_count4 = 0
            if not data__authors_any_of_count4:
                try:
                    if not isinstance(data__authors, (list, tuple)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".authors must be array", value=data__authors, name="" + (name_prefix or "data") + ".authors", definition={'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, rule='type')
                    data__authors_is_list = isinstance(data__authors, (list, tuple))
                    if data__authors_is_list:
                        data__authors_len = len(data__authors)
                        for data__authors_x, data__authors_item in enumerate(data__authors):
                            if not isinstance(data__authors_item, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".authors[{data__authors_x}]".format(**locals()) + " must be string", value=data__authors_item, name="" + (name_prefix or "data") + ".authors[{data__authors_x}]".format(**locals()) + "", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='type')
                            if isinstance(data__authors_item, str):
                                data__authors_item_len = len(data__authors_item)
                                if data__authors_item_len < 1:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".authors[{data__authors_x}]".format(**locals()) + " must be longer than or equal to 1 characters", value=data__authors_item, name="" + (name_prefix or "data") + ".authors[{data__authors_x}]".format(**locals()) + "", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='minLength')
                                if data__authors_item_len > 16384:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".authors[{data__authors_x}]".format(**locals()) + " must be shorter than or equal to 16384 characters", value=data__authors_item, name="" + (name_prefix or "data") + ".authors[{data__authors_x}]".format(**locals()) + "", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__authors_any_of_count4 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__authors_any_of_count4:
                try:
                    if not isinstance(data__authors, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".authors must be null", value=data__authors, name="" + (name_prefix or "data") + ".authors", definition={'type': 'null'}, rule='type')
                    data__authors_any_of_count4 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__authors_any_of_count4:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".authors cannot be validated by any definition", value=data__authors, name="" + (name_prefix or "data") + ".authors", definition={'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, rule='anyOf')
        if "changelog" in data_keys:
            data_keys.remove("changelog")
            data__changelog = data["changelog"]
            data__changelog_any_of_count5 = 0
            if not data__changelog_any_of_count5:
                try:
                    if not isinstance(data__changelog, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".changelog must be object", value=data__changelog, name="" + (name_prefix or "data") + ".changelog", definition={'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, rule='type')
                    data__changelog_is_dict = isinstance(data__changelog, dict)
                    if data__changelog_is_dict:
                        data__changelog_keys = set(data__changelog.keys())
                        for data__changelog_key in data__changelog_keys:
                            if data__changelog_key not in []:
                                data__changelog_value = data__changelog.get(data__changelog_key)
                                if not isinstance(data__changelog_value, (str)):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".changelog.{data__changelog_key}".format(**locals()) + " must be string", value=data__changelog_value, name="" + (name_prefix or "data") + ".changelog.{data__changelog_key}".format(**locals()) + "", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='type')
                                if isinstance(data__changelog_value, str):
                                    data__changelog_value_len = len(data__changelog_value)
                                    if data__changelog_value_len < 1:
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".changelog.{data__changelog_key}".format(**locals()) + " must be longer than or equal to 1 characters", value=data__changelog_value, name="" + (name_prefix or "data") + ".changelog.{data__changelog_key}".format(**locals()) + "", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='minLength')
                                    if data__changelog_value_len > 16384:
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".changelog.{data__changelog_key}".format(**locals()) + " must be shorter than or equal to 16384 characters", value=data__changelog_value, name="" + (name_prefix or "data") + ".changelog.{data__changelog_key}".format(**locals()) + "", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__changelog_any_of_count5 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__changelog_any_of_count5:
                try:
                    if not isinstance(data__changelog, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".changelog must be null", value=data__changelog, name="" + (name_prefix or "data") + ".changelog", definition={'type': 'null'}, rule='type')
                    data__changelog_any_of_count5 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__changelog_any_of_count5:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".changelog cannot be validated by any definition", value=data__changelog, name="" + (name_prefix or "data") + ".changelog", definition={'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, rule='anyOf')
        if "copyright" in data_keys:
            data_keys.remove("copyright")
            data__copyright = data["copyright"]
            data__copyright_any_of_count6 = 0
            if not data__copyright_any_of_count6:
                try:
                    if not isinstance(data__copyright, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".copyright must be string", value=data__copyright, name="" + (name_prefix or "data") + ".copyright", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__copyright, str):
                        data__copyright_len = len(data__copyright)
                        if data__copyright_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".copyright must be longer than or equal to 1 characters", value=data__copyright, name="" + (name_prefix or "data") + ".copyright", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__copyright_len > 16384:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".copyright must be shorter than or equal to 16384 characters", value=data__copyright, name="" + (name_prefix or "data") + ".copyright", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__copyright_any_of_count6 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__copyright_any_of_count6:
                try:
                    if not isinstance(data__copyright, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".copyright must be null", value=data__copyright, name="" + (name_prefix or "data") + ".copyright", definition={'type': 'null'}, rule='type')
                    data__copyright_any_of_count6 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__copyright_any_of_count6:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".copyright cannot be validated by any definition", value=data__copyright, name="" + (name_prefix or "data") + ".copyright", definition={'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "data_source" in data_keys:
            data_keys.remove("data_source")
            data__datasource = data["data_source"]
            data__datasource_any_of_count7 = 0
            if not data__datasource_any_of_count7:
                try:
                    if not isinstance(data__datasource, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".data_source must be string", value=data__datasource, name="" + (name_prefix or "data") + ".data_source", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__datasource, str):
                        data__datasource_len = len(data__datasource)
                        if data__datasource_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".data_source must be longer than or equal to 1 characters", value=data__datasource, name="" + (name_prefix or "data") + ".data_source", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__datasource_len > 16384:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".data_source must be shorter than or equal to 16384 characters", value=data__datasource, name="" + (name_prefix or "data") + ".data_source", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__datasource_any_of_count7 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__datasource_any_of_count7:
                try:
                    if not isinstance(data__datasource, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".data_source must be null", value=data__datasource, name="" + (name_prefix or "data") + ".data_source", definition={'type': 'null'}, rule='type')
                    data__datasource_any_of_count7 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__datasource_any_of_count7:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".data_source cannot be validated by any definition", value=data__datasource, name="" + (name_prefix or "data") + ".data_source", definition={'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "description" in data_keys:
            data_keys.remove("description")
            data__description = data["description"]
            data__description_any_of_count8 = 0
            if not data__description_any_of_count8:
                try:
                    if not isinstance(data__description, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".description must be string", value=data__description, name="" + (name_prefix or "data") + ".description", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__description, str):
                        data__description_len = len(data__description)
                        if data__description_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".description must be longer than or equal to 1 characters", value=data__description, name="" + (name_prefix or "data") + ".description", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__description_len > 16384:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".description must be shorter than or equal to 16384 characters", value=data__description, name="" + (name_prefix or "data") + ".description", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__description_any_of_count8 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__description_any_of_count8:
                try:
                    if not isinstance(data__description, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".description must be null", value=data__description, name="" + (name_prefix or "data") + ".description", definition={'type': 'null'}, rule='type')
                    data__description_any_of_count8 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__description_any_of_count8:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".description cannot be validated by any definition", value=data__description, name="" + (name_prefix or "data") + ".description", definition={'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "format" in data_keys:
            data_keys.remove("format")
            data__format = data["format"]
            if not isinstance(data__format, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".format must be string", value=data__format, name="" + (name_prefix or "data") + ".format", definition={'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, rule='type')
            if not (isinstance(data__format, str) and data__format == 'monai_bundle' or isinstance(data__format, str) and data__format == 'huggingface'):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".format must be one of ['monai_bundle', 'huggingface']", value=data__format, name="" + (name_prefix or "data") + ".format", definition={'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, rule='enum')
        if "intended_use" in data_keys:
            data_keys.remove("intended_use")
            data__intendeduse = data["intended_use"]
            data__intendeduse_any_of_count9 = 0
            if not data__intendeduse_any_of_count9:
                try:
                    if not isinstance(data__intendeduse, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".intended_use must be string", value=data__intendeduse, name="" + (name_prefix or "data") + ".intended_use", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__intendeduse, str):
                        data__intendeduse_len = len(data__intendeduse)
                        if data__intendeduse_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".intended_use must be longer than or equal to 1 characters", value=data__intendeduse, name="" + (name_prefix or "data") + ".intended_use", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__intendeduse_len > 16384:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".intended_use must be shorter than or equal to 16384 characters", value=data__intendeduse, name="" + (name_prefix or "data") + ".intended_use", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__intendeduse_any_of_count9 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__intendeduse_any_of_count9:
                try:
                    if not isinstance(data__intendeduse, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".intended_use must be null", value=data__intendeduse, name="" + (name_prefix or "data") + ".intended_use", definition={'type': 'null'}, rule='type')
                    data__intendeduse_any_of_count9 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__intendeduse_any_of_count9:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".intended_use cannot be validated by any definition", value=data__intendeduse, name="" + (name_prefix or "data") + ".intended_use", definition={'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "license" in data_keys:
            data_keys.remove("license")
            data__license = data["license"]
            data__license_any_of_count10 = 0
            if not data__license_any_of_count10:
                try:
                    if not isinstance(data__license, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".license must be string", value=data__license, name="" + (name_prefix or "data") + ".license", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__license, str):
                        data__license_len = len(data__license)
                        if data__license_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".license must be longer than or equal to 1 characters", value=data__license, name="" + (name_prefix or "data") + ".license", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__license_len > 16384:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".license must be shorter than or equal to 16384 characters", value=data__license, name="" + (name_prefix or "data") + ".license", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__license_any_of_count10 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__license_any_of_count10:
                try:
                    if not isinstance(data__license, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".license must be null", value=data__license, name="" + (name_prefix or "data") + ".license", definition={'type': 'null'}, rule='type')
                    data__license_any_of_count10 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__license_any_of_count10:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".license cannot be validated by any definition", value=data__license, name="" + (name_prefix or "data") + ".license", definition={'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "model_type" in data_keys:
            data_keys.remove("model_type")
            data__modeltype = data["model_type"]
            data__modeltype_any_of_count11 = 0
            if not data__modeltype_any_of_count11:
                try:
                    if not isinstance(data__modeltype, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".model_type must be string", value=data__modeltype, name="" + (name_prefix or "data") + ".model_type", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__modeltype, str):
                        data__modeltype_len = len(data__modeltype)
                        if data__modeltype_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".model_type must be longer than or equal to 1 characters", value=data__modeltype, name="" + (name_prefix or "data") + ".model_type", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__modeltype_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".model_type must be shorter than or equal to 256 characters", value=data__modeltype, name="" + (name_prefix or "data") + ".model_type", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__modeltype_any_of_count11 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__modeltype_any_of_count11:
                try:
                    if not isinstance(data__modeltype, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".model_type must be null", value=data__modeltype, name="" + (name_prefix or "data") + ".model_type", definition={'type': 'null'}, rule='type')
                    data__modeltype_any_of_count11 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__modeltype_any_of_count11:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".model_type cannot be validated by any definition", value=data__modeltype, name="" + (name_prefix or "data") + ".model_type", definition={'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "monai_version" in data_keys:
            data_keys.remove("monai_version")
            data__monaiversion = data["monai_version"]
            data__monaiversion_any_of_count12 = 0
            if not data__monaiversion_any_of_count12:
                try:
                    if not isinstance(data__monaiversion, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".monai_version must be string", value=data__monaiversion, name="" + (name_prefix or "data") + ".monai_version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__monaiversion, str):
                        data__monaiversion_len = len(data__monaiversion)
                        if data__monaiversion_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".monai_version must be longer than or equal to 1 characters", value=data__monaiversion, name="" + (name_prefix or "data") + ".monai_version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__monaiversion_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".monai_version must be shorter than or equal to 256 characters", value=data__monaiversion, name="" + (name_prefix or "data") + ".monai_version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__monaiversion_any_of_count12 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__monaiversion_any_of_count12:
                try:
                    if not isinstance(data__monaiversion, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".monai_version must be null", value=data__monaiversion, name="" + (name_prefix or "data") + ".monai_version", definition={'type': 'null'}, rule='type')
                    data__monaiversion_any_of_count12 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__monaiversion_any_of_count12:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".monai_version cannot be validated by any definition", value=data__monaiversion, name="" + (name_prefix or "data") + ".monai_version", definition={'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "name" in data_keys:
            data_keys.remove("name")
            data__name = data["name"]
            data__name_any_of_count13 = 0
            if not data__name_any_of_count13:
                try:
                    if not isinstance(data__name, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be string", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__name, str):
                        data__name_len = len(data__name)
                        if data__name_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be longer than or equal to 1 characters", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__name_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be shorter than or equal to 256 characters", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__name_any_of_count13 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__name_any_of_count13:
                try:
                    if not isinstance(data__name, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be null", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'type': 'null'}, rule='type')
                    data__name_any_of_count13 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__name_any_of_count13:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".name cannot be validated by any definition", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "pytorch_version" in data_keys:
            data_keys.remove("pytorch_version")
            data__pytorchversion = data["pytorch_version"]
            data__pytorchversion_any_of_count14 = 0
            if not data__pytorchversion_any_of_count14:
                try:
                    if not isinstance(data__pytorchversion, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".pytorch_version must be string", value=data__pytorchversion, name="" + (name_prefix or "data") + ".pytorch_version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__pytorchversion, str):
                        data__pytorchversion_len = len(data__pytorchversion)
                        if data__pytorchversion_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".pytorch_version must be longer than or equal to 1 characters", value=data__pytorchversion, name="" + (name_prefix or "data") + ".pytorch_version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__pytorchversion_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".pytorch_version must be shorter than or equal to 256 characters", value=data__pytorchversion, name="" + (name_prefix or "data") + ".pytorch_version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__pytorchversion_any_of_count14 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__pytorchversion_any_of_count14:
                try:
                    if not isinstance(data__pytorchversion, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".pytorch_version must be null", value=data__pytorchversion, name="" + (name_prefix or "data") + ".pytorch_version", definition={'type': 'null'}, rule='type')
                    data__pytorchversion_any_of_count14 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__pytorchversion_any_of_count14:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".pytorch_version cannot be validated by any definition", value=data__pytorchversion, name="" + (name_prefix or "data") + ".pytorch_version", definition={'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "task" in data_keys:
            data_keys.remove("task")
            data__task = data["task"]
            data__task_any_of_count15 = 0
            if not data__task_any_of_count15:
                try:
                    if not isinstance(data__task, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".task must be string", value=data__task, name="" + (name_prefix or "data") + ".task", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__task, str):
                        data__task_len = len(data__task)
                        if data__task_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".task must be longer than or equal to 1 characters", value=data__task, name="" + (name_prefix or "data") + ".task", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__task_len > 16384:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".task must be shorter than or equal to 16384 characters", value=data__task, name="" + (name_prefix or "data") + ".task", definition={'maxLength': 16384, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__task_any_of_count15 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__task_any_of_count15:
                try:
                    if not isinstance(data__task, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".task must be null", value=data__task, name="" + (name_prefix or "data") + ".task", definition={'type': 'null'}, rule='type')
                    data__task_any_of_count15 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__task_any_of_count15:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".task cannot be validated by any definition", value=data__task, name="" + (name_prefix or "data") + ".task", definition={'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "transformers_version" in data_keys:
            data_keys.remove("transformers_version")
            data__transformersversion = data["transformers_version"]
            data__transformersversion_any_of_count16 = 0
            if not data__transformersversion_any_of_count16:
                try:
                    if not isinstance(data__transformersversion, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".transformers_version must be string", value=data__transformersversion, name="" + (name_prefix or "data") + ".transformers_version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__transformersversion, str):
                        data__transformersversion_len = len(data__transformersversion)
                        if data__transformersversion_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".transformers_version must be longer than or equal to 1 characters", value=data__transformersversion, name="" + (name_prefix or "data") + ".transformers_version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__transformersversion_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".transformers_version must be shorter than or equal to 256 characters", value=data__transformersversion, name="" + (name_prefix or "data") + ".transformers_version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__transformersversion_any_of_count16 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__transformersversion_any_of_count16:
                try:
                    if not isinstance(data__transformersversion, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".transformers_version must be null", value=data__transformersversion, name="" + (name_prefix or "data") + ".transformers_version", definition={'type': 'null'}, rule='type')
                    data__transformersversion_any_of_count16 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__transformersversion_any_of_count16:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".transformers_version cannot be validated by any definition", value=data__transformersversion, name="" + (name_prefix or "data") + ".transformers_version", definition={'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "version" in data_keys:
            data_keys.remove("version")
            data__version = data["version"]
            data__version_any_of_count17 = 0
            if not data__version_any_of_count17:
                try:
                    if not isinstance(data__version, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be string", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__version, str):
                        data__version_len = len(data__version)
                        if data__version_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be longer than or equal to 1 characters", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__version_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be shorter than or equal to 256 characters", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__version_any_of_count17 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__version_any_of_count17:
                try:
                    if not isinstance(data__version, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be null", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'type': 'null'}, rule='type')
                    data__version_any_of_count17 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__version_any_of_count17:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".version cannot be validated by any definition", value=data__version, name="" + (name_prefix or "data") + ".version", definition={'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'architecture': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'authors': {'anyOf': [{'items': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, {'type': 'null'}]}, 'changelog': {'anyOf': [{'additionalProperties': {'maxLength': 16384, 'minLength': 1, 'type': 'string'}, 'type': 'object'}, {'type': 'null'}]}, 'copyright': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'data_source': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'description': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'format': {'enum': ['monai_bundle', 'huggingface'], 'type': 'string'}, 'intended_use': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'license': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'model_type': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'monai_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'name': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'pytorch_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'task': {'anyOf': [{'maxLength': 16384, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'transformers_version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'version': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}}, 'required': ['format'], 'type': 'object'}, rule='additionalProperties')
    return data

def validate____defs_evidenceprovenance(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['collected_by', 'signed', 'evidence_digest']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain " + (str(sorted(data__missing_keys)) + " properties"), value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, rule='required')
        data_keys = set(data.keys())
        if "collected_by" in data_keys:
            data_keys.remove("collected_by")
            data__collectedby = data["collected_by"]
            if not isinstance(data__collectedby, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".collected_by must be string", value=data__collectedby, name="" + (name_prefix or "data") + ".collected_by", definition={'enum': ['certify', 'collect'], 'type': 'string'}, rule='type')
            if not (isinstance(data__collectedby, str) and data__collectedby == 'certify' or isinstance(data__collectedby, str) and data__collectedby == 'collect'):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".collected_by must be one of ['certify', 'collect']", value=data__collectedby, name="" + (name_prefix or "data") + ".collected_by", definition={'enum': ['certify', 'collect'], 'type': 'string'}, rule='enum')
        if "collector" in data_keys:
            data_keys.remove("collector")
            data__collector = data["collector"]
            data__collector_any_of_count18 = 0
            if not data__collector_any_of_count18:
                try:
                    validate____defs_collectorref(data__collector, custom_formats, (name_prefix or "data") + ".collector")
                    data__collector_any_of_count18 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__collector_any_of_count18:
                try:
                    if not isinstance(data__collector, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".collector must be null", value=data__collector, name="" + (name_prefix or "data") + ".collector", definition={'type': 'null'}, rule='type')
                    data__collector_any_of_count18 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__collector_any_of_count18:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".collector cannot be validated by any definition", value=data__collector, name="" + (name_prefix or "data") + ".collector", definition={'anyOf': [{'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, {'type': 'null'}]}, rule='anyOf')
        if "evidence_digest" in data_keys:
            data_keys.remove("evidence_digest")
            data__evidencedigest = data["evidence_digest"]
            validate____defs_digestset(data__evidencedigest, custom_formats, (name_prefix or "data") + ".evidence_digest")
        if "finished_at" in data_keys:
            data_keys.remove("finished_at")
            data__finishedat = data["finished_at"]
            data__finishedat_any_of_count19 = 0
            if not data__finishedat_any_of_count19:
                try:
                    if not isinstance(data__finishedat, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".finished_at must be string", value=data__finishedat, name="" + (name_prefix or "data") + ".finished_at", definition={'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, rule='type')
                    if isinstance(data__finishedat, str):
                        if not REGEX_PATTERNS['^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$'].search(data__finishedat):
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".finished_at must match pattern ^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$", value=data__finishedat, name="" + (name_prefix or "data") + ".finished_at", definition={'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, rule='pattern')
                    data__finishedat_any_of_count19 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__finishedat_any_of_count19:
                try:
                    if not isinstance(data__finishedat, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".finished_at must be null", value=data__finishedat, name="" + (name_prefix or "data") + ".finished_at", definition={'type': 'null'}, rule='type')
                    data__finishedat_any_of_count19 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__finishedat_any_of_count19:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".finished_at cannot be validated by any definition", value=data__finishedat, name="" + (name_prefix or "data") + ".finished_at", definition={'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "host" in data_keys:
            data_keys.remove("host")
            data__host = data["host"]
            data__host_any_of_count20 = 0
            if not data__host_any_of_count20:
                try:
                    if not isinstance(data__host, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".host must be string", value=data__host, name="" + (name_prefix or "data") + ".host", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__host, str):
                        data__host_len = len(data__host)
                        if data__host_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".host must be longer than or equal to 1 characters", value=data__host, name="" + (name_prefix or "data") + ".host", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__host_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".host must be shorter than or equal to 256 characters", value=data__host, name="" + (name_prefix or "data") + ".host", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
                    data__host_any_of_count20 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__host_any_of_count20:
                try:
                    if not isinstance(data__host, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".host must be null", value=data__host, name="" + (name_prefix or "data") + ".host", definition={'type': 'null'}, rule='type')
                    data__host_any_of_count20 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__host_any_of_count20:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".host cannot be validated by any definition", value=data__host, name="" + (name_prefix or "data") + ".host", definition={'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "note" in data_keys:
            data_keys.remove("note")
            data__note = data["note"]
            data__note_any_of_count21 = 0
            if not data__note_any_of_count21:
                try:
                    if not isinstance(data__note, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".note must be string", value=data__note, name="" + (name_prefix or "data") + ".note", definition={'maxLength': 1024, 'type': 'string'}, rule='type')
                    if isinstance(data__note, str):
                        data__note_len = len(data__note)
                        if data__note_len > 1024:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".note must be shorter than or equal to 1024 characters", value=data__note, name="" + (name_prefix or "data") + ".note", definition={'maxLength': 1024, 'type': 'string'}, rule='maxLength')
                    data__note_any_of_count21 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__note_any_of_count21:
                try:
                    if not isinstance(data__note, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".note must be null", value=data__note, name="" + (name_prefix or "data") + ".note", definition={'type': 'null'}, rule='type')
                    data__note_any_of_count21 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__note_any_of_count21:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".note cannot be validated by any definition", value=data__note, name="" + (name_prefix or "data") + ".note", definition={'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "signed" in data_keys:
            data_keys.remove("signed")
            data__signed = data["signed"]
            if not isinstance(data__signed, (bool)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".signed must be boolean", value=data__signed, name="" + (name_prefix or "data") + ".signed", definition={'type': 'boolean'}, rule='type')
        if "started_at" in data_keys:
            data_keys.remove("started_at")
            data__startedat = data["started_at"]
            data__startedat_any_of_count22 = 0
            if not data__startedat_any_of_count22:
                try:
                    if not isinstance(data__startedat, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".started_at must be string", value=data__startedat, name="" + (name_prefix or "data") + ".started_at", definition={'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, rule='type')
                    if isinstance(data__startedat, str):
                        if not REGEX_PATTERNS['^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$'].search(data__startedat):
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".started_at must match pattern ^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$", value=data__startedat, name="" + (name_prefix or "data") + ".started_at", definition={'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, rule='pattern')
                    data__startedat_any_of_count22 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__startedat_any_of_count22:
                try:
                    if not isinstance(data__startedat, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".started_at must be null", value=data__startedat, name="" + (name_prefix or "data") + ".started_at", definition={'type': 'null'}, rule='type')
                    data__startedat_any_of_count22 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__startedat_any_of_count22:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".started_at cannot be validated by any definition", value=data__startedat, name="" + (name_prefix or "data") + ".started_at", definition={'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, rule='anyOf')
        if "statement_digest" in data_keys:
            data_keys.remove("statement_digest")
            data__statementdigest = data["statement_digest"]
            data__statementdigest_any_of_count23 = 0
            if not data__statementdigest_any_of_count23:
                try:
                    validate____defs_digestset(data__statementdigest, custom_formats, (name_prefix or "data") + ".statement_digest")
                    data__statementdigest_any_of_count23 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__statementdigest_any_of_count23:
                try:
                    if not isinstance(data__statementdigest, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".statement_digest must be null", value=data__statementdigest, name="" + (name_prefix or "data") + ".statement_digest", definition={'type': 'null'}, rule='type')
                    data__statementdigest_any_of_count23 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__statementdigest_any_of_count23:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".statement_digest cannot be validated by any definition", value=data__statementdigest, name="" + (name_prefix or "data") + ".statement_digest", definition={'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, rule='anyOf')
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'collected_by': {'enum': ['certify', 'collect'], 'type': 'string'}, 'collector': {'anyOf': [{'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, {'type': 'null'}]}, 'evidence_digest': {'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, 'finished_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'host': {'anyOf': [{'maxLength': 256, 'minLength': 1, 'type': 'string'}, {'type': 'null'}]}, 'note': {'anyOf': [{'maxLength': 1024, 'type': 'string'}, {'type': 'null'}]}, 'signed': {'type': 'boolean'}, 'started_at': {'anyOf': [{'pattern': '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,6})?Z$', 'type': 'string'}, {'type': 'null'}]}, 'statement_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}}, 'required': ['collected_by', 'signed', 'evidence_digest'], 'type': 'object'}, rule='additionalProperties')
    return data

def validate____defs_collectorref(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['name', 'role', 'keyid', 'trusted_as']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain " + (str(sorted(data__missing_keys)) + " properties"), value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, rule='required')
        data_keys = set(data.keys())
        if "keyid" in data_keys:
            data_keys.remove("keyid")
            data__keyid = data["keyid"]
            if not isinstance(data__keyid, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".keyid must be string", value=data__keyid, name="" + (name_prefix or "data") + ".keyid", definition={'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, rule='type')
            if isinstance(data__keyid, str):
                if not REGEX_PATTERNS['^[0-9a-f]{64}$'].search(data__keyid):
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".keyid must match pattern ^[0-9a-f]{64}$", value=data__keyid, name="" + (name_prefix or "data") + ".keyid", definition={'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, rule='pattern')
        if "name" in data_keys:
            data_keys.remove("name")
            data__name = data["name"]
            if not isinstance(data__name, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be string", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
            if isinstance(data__name, str):
                data__name_len = len(data__name)
                if data__name_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be longer than or equal to 1 characters", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                if data__name_len > 256:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be shorter than or equal to 256 characters", value=data__name, name="" + (name_prefix or "data") + ".name", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if "role" in data_keys:
            data_keys.remove("role")
            data__role = data["role"]
            if not isinstance(data__role, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".role must be string", value=data__role, name="" + (name_prefix or "data") + ".role", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
            if isinstance(data__role, str):
                data__role_len = len(data__role)
                if data__role_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".role must be longer than or equal to 1 characters", value=data__role, name="" + (name_prefix or "data") + ".role", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                if data__role_len > 256:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".role must be shorter than or equal to 256 characters", value=data__role, name="" + (name_prefix or "data") + ".role", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if "trusted_as" in data_keys:
            data_keys.remove("trusted_as")
            data__trustedas = data["trusted_as"]
            if not isinstance(data__trustedas, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".trusted_as must be string", value=data__trustedas, name="" + (name_prefix or "data") + ".trusted_as", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
            if isinstance(data__trustedas, str):
                data__trustedas_len = len(data__trustedas)
                if data__trustedas_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".trusted_as must be longer than or equal to 1 characters", value=data__trustedas, name="" + (name_prefix or "data") + ".trusted_as", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                if data__trustedas_len > 256:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".trusted_as must be shorter than or equal to 256 characters", value=data__trustedas, name="" + (name_prefix or "data") + ".trusted_as", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'keyid': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}, 'name': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'role': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'trusted_as': {'maxLength': 256, 'minLength': 1, 'type': 'string'}}, 'required': ['name', 'role', 'keyid', 'trusted_as'], 'type': 'object'}, rule='additionalProperties')
    return data

def validate____defs_deploymentenvelope(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data_keys = set(data.keys())
        if "fatal_differences" in data_keys:
            data_keys.remove("fatal_differences")
            data__fataldifferences = data["fatal_differences"]
            if not isinstance(data__fataldifferences, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".fatal_differences must be array", value=data__fataldifferences, name="" + (name_prefix or "data") + ".fatal_differences", definition={'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, rule='type')
            data__fataldifferences_is_list = isinstance(data__fataldifferences, (list, tuple))
            if data__fataldifferences_is_list:
                data__fataldifferences_len = len(data__fataldifferences)
                for data__fataldifferences_x, data__fataldifferences_item in enumerate(data__fataldifferences):
                    if not isinstance(data__fataldifferences_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + " must be string", value=data__fataldifferences_item, name="" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__fataldifferences_item, str):
                        data__fataldifferences_item_len = len(data__fataldifferences_item)
                        if data__fataldifferences_item_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + " must be longer than or equal to 1 characters", value=data__fataldifferences_item, name="" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__fataldifferences_item_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + " must be shorter than or equal to 256 characters", value=data__fataldifferences_item, name="" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if "per_target" in data_keys:
            data_keys.remove("per_target")
            data__pertarget = data["per_target"]
            if not isinstance(data__pertarget, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".per_target must be object", value=data__pertarget, name="" + (name_prefix or "data") + ".per_target", definition={'additionalProperties': {'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, 'type': 'object'}, rule='type')
            data__pertarget_is_dict = isinstance(data__pertarget, dict)
            if data__pertarget_is_dict:
                data__pertarget_keys = set(data__pertarget.keys())
                for data__pertarget_key in data__pertarget_keys:
                    if data__pertarget_key not in []:
                        data__pertarget_value = data__pertarget.get(data__pertarget_key)
                        validate____defs_targetenvelope(data__pertarget_value, custom_formats, (name_prefix or "data") + ".per_target.{data__pertarget_key}".format(**locals()))
        if "runtime" in data_keys:
            data_keys.remove("runtime")
            data__runtime = data["runtime"]
            if not isinstance(data__runtime, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".runtime must be object", value=data__runtime, name="" + (name_prefix or "data") + ".runtime", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
            data__runtime_is_dict = isinstance(data__runtime, dict)
            if data__runtime_is_dict:
                data__runtime_keys = set(data__runtime.keys())
        if "targets" in data_keys:
            data_keys.remove("targets")
            data__targets = data["targets"]
            if not isinstance(data__targets, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".targets must be array", value=data__targets, name="" + (name_prefix or "data") + ".targets", definition={'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, rule='type')
            data__targets_is_list = isinstance(data__targets, (list, tuple))
            if data__targets_is_list:
                data__targets_len = len(data__targets)
                for data__targets_x, data__targets_item in enumerate(data__targets):
                    if not isinstance(data__targets_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".targets[{data__targets_x}]".format(**locals()) + " must be string", value=data__targets_item, name="" + (name_prefix or "data") + ".targets[{data__targets_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__targets_item, str):
                        data__targets_item_len = len(data__targets_item)
                        if data__targets_item_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".targets[{data__targets_x}]".format(**locals()) + " must be longer than or equal to 1 characters", value=data__targets_item, name="" + (name_prefix or "data") + ".targets[{data__targets_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__targets_item_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".targets[{data__targets_x}]".format(**locals()) + " must be shorter than or equal to 256 characters", value=data__targets_item, name="" + (name_prefix or "data") + ".targets[{data__targets_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'per_target': {'additionalProperties': {'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'$ref': '#/$defs/DigestSet'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, 'type': 'object'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'targets': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}}, 'type': 'object'}, rule='additionalProperties')
    return data

def validate____defs_targetenvelope(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, rule='type')
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['verdict', 'required']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain " + (str(sorted(data__missing_keys)) + " properties"), value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, rule='required')
        data_keys = set(data.keys())
        if "evidence_digest" in data_keys:
            data_keys.remove("evidence_digest")
            data__evidencedigest = data["evidence_digest"]
            data__evidencedigest_any_of_count24 = 0
            if not data__evidencedigest_any_of_count24:
                try:
                    validate____defs_digestset(data__evidencedigest, custom_formats, (name_prefix or "data") + ".evidence_digest")
                    data__evidencedigest_any_of_count24 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__evidencedigest_any_of_count24:
                try:
                    if not isinstance(data__evidencedigest, (NoneType)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".evidence_digest must be null", value=data__evidencedigest, name="" + (name_prefix or "data") + ".evidence_digest", definition={'type': 'null'}, rule='type')
                    data__evidencedigest_any_of_count24 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if not data__evidencedigest_any_of_count24:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".evidence_digest cannot be validated by any definition", value=data__evidencedigest, name="" + (name_prefix or "data") + ".evidence_digest", definition={'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, rule='anyOf')
        if "fatal_differences" in data_keys:
            data_keys.remove("fatal_differences")
            data__fataldifferences = data["fatal_differences"]
            if not isinstance(data__fataldifferences, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".fatal_differences must be array", value=data__fataldifferences, name="" + (name_prefix or "data") + ".fatal_differences", definition={'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, rule='type')
            data__fataldifferences_is_list = isinstance(data__fataldifferences, (list, tuple))
            if data__fataldifferences_is_list:
                data__fataldifferences_len = len(data__fataldifferences)
                for data__fataldifferences_x, data__fataldifferences_item in enumerate(data__fataldifferences):
                    if not isinstance(data__fataldifferences_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + " must be string", value=data__fataldifferences_item, name="" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__fataldifferences_item, str):
                        data__fataldifferences_item_len = len(data__fataldifferences_item)
                        if data__fataldifferences_item_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + " must be longer than or equal to 1 characters", value=data__fataldifferences_item, name="" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__fataldifferences_item_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + " must be shorter than or equal to 256 characters", value=data__fataldifferences_item, name="" + (name_prefix or "data") + ".fatal_differences[{data__fataldifferences_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if "hardware" in data_keys:
            data_keys.remove("hardware")
            data__hardware = data["hardware"]
            if not isinstance(data__hardware, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".hardware must be array", value=data__hardware, name="" + (name_prefix or "data") + ".hardware", definition={'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, rule='type')
            data__hardware_is_list = isinstance(data__hardware, (list, tuple))
            if data__hardware_is_list:
                data__hardware_len = len(data__hardware)
                for data__hardware_x, data__hardware_item in enumerate(data__hardware):
                    if not isinstance(data__hardware_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".hardware[{data__hardware_x}]".format(**locals()) + " must be string", value=data__hardware_item, name="" + (name_prefix or "data") + ".hardware[{data__hardware_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='type')
                    if isinstance(data__hardware_item, str):
                        data__hardware_item_len = len(data__hardware_item)
                        if data__hardware_item_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".hardware[{data__hardware_x}]".format(**locals()) + " must be longer than or equal to 1 characters", value=data__hardware_item, name="" + (name_prefix or "data") + ".hardware[{data__hardware_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='minLength')
                        if data__hardware_item_len > 256:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".hardware[{data__hardware_x}]".format(**locals()) + " must be shorter than or equal to 256 characters", value=data__hardware_item, name="" + (name_prefix or "data") + ".hardware[{data__hardware_x}]".format(**locals()) + "", definition={'maxLength': 256, 'minLength': 1, 'type': 'string'}, rule='maxLength')
        if "required" in data_keys:
            data_keys.remove("required")
            data__required = data["required"]
            if not isinstance(data__required, (bool)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".required must be boolean", value=data__required, name="" + (name_prefix or "data") + ".required", definition={'type': 'boolean'}, rule='type')
        if "runtime" in data_keys:
            data_keys.remove("runtime")
            data__runtime = data["runtime"]
            if not isinstance(data__runtime, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".runtime must be object", value=data__runtime, name="" + (name_prefix or "data") + ".runtime", definition={'additionalProperties': True, 'type': 'object'}, rule='type')
            data__runtime_is_dict = isinstance(data__runtime, dict)
            if data__runtime_is_dict:
                data__runtime_keys = set(data__runtime.keys())
        if "verdict" in data_keys:
            data_keys.remove("verdict")
            data__verdict = data["verdict"]
            if not isinstance(data__verdict, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".verdict must be string", value=data__verdict, name="" + (name_prefix or "data") + ".verdict", definition={'enum': ['pass', 'fail'], 'type': 'string'}, rule='type')
            if not (isinstance(data__verdict, str) and data__verdict == 'pass' or isinstance(data__verdict, str) and data__verdict == 'fail'):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".verdict must be one of ['pass', 'fail']", value=data__verdict, name="" + (name_prefix or "data") + ".verdict", definition={'enum': ['pass', 'fail'], 'type': 'string'}, rule='enum')
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties", value=data, name="" + (name_prefix or "data") + "", definition={'additionalProperties': False, 'properties': {'evidence_digest': {'anyOf': [{'additionalProperties': False, 'properties': {'sha256': {'pattern': '^[0-9a-f]{64}$', 'type': 'string'}}, 'required': ['sha256'], 'type': 'object'}, {'type': 'null'}]}, 'fatal_differences': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'hardware': {'items': {'maxLength': 256, 'minLength': 1, 'type': 'string'}, 'type': 'array'}, 'required': {'type': 'boolean'}, 'runtime': {'additionalProperties': True, 'type': 'object'}, 'verdict': {'enum': ['pass', 'fail'], 'type': 'string'}}, 'required': ['verdict', 'required'], 'type': 'object'}, rule='additionalProperties')
    return data
