"""docs/deploy-policy.json, the policy the deploying identity needs, against what a deploy
of every stack (and every component with every platform option) declares: each resource
type's create, read, update, delete and tag actions, as the AWS provider calls them, are
in it; a resource type without an entry here fails, so a new one gets its actions. The
policy parses and parliament (which knows every action) finds nothing unknown in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from parliament import analyze_policy_string

from exactly_once.components.platform import STATE_MACHINE_LOGGING
from tests.unit.pulumi_harness import COMPONENTS, ROOT, component, run, run_stack
from tests.unit.test_iam import DURABLE_ACTIONS
from tests.unit.test_platform import EVERYTHING

POLICY = ROOT / "docs" / "deploy-policy.json"
API = ["apigateway:GET", "apigateway:POST", "apigateway:PUT", "apigateway:PATCH"]
API += ["apigateway:DELETE"]
BUCKET = ["s3:CreateBucket", "s3:DeleteBucket", "s3:ListBucket", "s3:GetBucketTagging"]
BUCKET += ["s3:PutBucketTagging", "s3:GetBucketPolicy", "s3:GetBucketAcl", "s3:GetBucketCORS"]
BUCKET += ["s3:GetBucketWebsite", "s3:GetBucketLogging", "s3:GetBucketRequestPayment"]
BUCKET += ["s3:GetAccelerateConfiguration", "s3:GetReplicationConfiguration"]
BUCKET += ["s3:GetBucketObjectLockConfiguration", "s3:GetBucketVersioning"]
BUCKET += ["s3:GetLifecycleConfiguration", "s3:GetEncryptionConfiguration"]
# force_destroy (the ETL's buckets it creates) empties a bucket's versions before deleting it
BUCKET += ["s3:ListBucketVersions", "s3:DeleteObject", "s3:DeleteObjectVersion"]
# What the AWS provider calls to create, read, update, delete and tag each resource type.
NEEDS: dict[str, list[str]] = {
    "aws:iam/role:Role": [
        "iam:CreateRole",
        "iam:GetRole",
        "iam:DeleteRole",
        "iam:UpdateAssumeRolePolicy",
        "iam:TagRole",
        "iam:UntagRole",
        "iam:ListRolePolicies",
        "iam:ListAttachedRolePolicies",
        "iam:ListInstanceProfilesForRole",
        "iam:PutRolePermissionsBoundary",
        "iam:DeleteRolePermissionsBoundary",
    ],
    "aws:iam/rolePolicy:RolePolicy": [
        "iam:PutRolePolicy",
        "iam:GetRolePolicy",
        "iam:DeleteRolePolicy",
    ],
    "aws:lambda/function:Function": [
        "lambda:CreateFunction",
        "lambda:GetFunction",
        "lambda:GetFunctionCodeSigningConfig",
        "lambda:ListVersionsByFunction",
        "lambda:UpdateFunctionCode",
        "lambda:UpdateFunctionConfiguration",
        "lambda:PublishVersion",
        "lambda:DeleteFunction",
        "lambda:TagResource",
        "lambda:UntagResource",
        "lambda:ListTags",
        "lambda:PutFunctionConcurrency",
        "lambda:DeleteFunctionConcurrency",
        # a function with layers (platform.functions[...].layers): Lambda checks that the
        # caller may get each (Lambda developer guide, "Granting users access to a Lambda
        # layer"); a layer of another account, its owner's grant of this same action (Lambda
        # API reference, AddLayerVersionPermission: its Action's only allowed value is
        # lambda:GetLayerVersion); the function's own role needs nothing for them
        "lambda:GetLayerVersion",
        # an update of a published (durable) function waits on its configuration
        "lambda:GetFunctionConfiguration",
        # deleting a durable function stops its executions first
        "lambda:ListDurableExecutionsByFunction",
        "lambda:GetDurableExecution",
        "lambda:StopDurableExecution",
        "iam:PassRole",
    ],
    "aws:lambda/permission:Permission": [
        "lambda:AddPermission",
        "lambda:RemovePermission",
        "lambda:GetPolicy",
    ],
    "aws:lambda/eventSourceMapping:EventSourceMapping": [
        "lambda:CreateEventSourceMapping",
        "lambda:GetEventSourceMapping",
        "lambda:UpdateEventSourceMapping",
        "lambda:DeleteEventSourceMapping",
    ],
    "aws:cloudwatch/logGroup:LogGroup": [
        "logs:CreateLogGroup",
        "logs:DeleteLogGroup",
        "logs:DescribeLogGroups",
        "logs:PutRetentionPolicy",
        "logs:DeleteRetentionPolicy",
        "logs:ListTagsForResource",
        "logs:TagResource",
        "logs:UntagResource",
    ],
    "aws:sfn/stateMachine:StateMachine": [
        "states:CreateStateMachine",
        "states:DescribeStateMachine",
        "states:UpdateStateMachine",
        "states:DeleteStateMachine",
        "states:ListStateMachineVersions",
        "states:TagResource",
        "states:UntagResource",
        "states:ListTagsForResource",
        # the provider validates a changed definition, in preview and in up
        "states:ValidateStateMachineDefinition",
        "iam:PassRole",
        # with logging on, the caller sets up the vended-logs delivery, with the actions
        # the machine's role needs (Step Functions developer guide, "Logging using
        # CloudWatch Logs")
        *STATE_MACHINE_LOGGING,
    ],
    "aws:dynamodb/table:Table": [
        "dynamodb:CreateTable",
        "dynamodb:DescribeTable",
        "dynamodb:UpdateTable",
        "dynamodb:DeleteTable",
        "dynamodb:UpdateTimeToLive",
        "dynamodb:DescribeTimeToLive",
        "dynamodb:UpdateContinuousBackups",
        "dynamodb:DescribeContinuousBackups",
        "dynamodb:TagResource",
        "dynamodb:UntagResource",
        "dynamodb:ListTagsOfResource",
    ],
    "aws:dynamodb/tableItem:TableItem": [
        "dynamodb:PutItem",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    ],
    **{
        f"aws:apigateway/{kind[0].lower()}{kind[1:]}:{kind}": API
        for kind in (
            "ApiKey",
            "Deployment",
            "Integration",
            "IntegrationResponse",
            "Method",
            "MethodResponse",
            "Model",
            "RequestValidator",
            "Resource",
            "Response",
            "RestApi",
            "Stage",
            "UsagePlan",
            "UsagePlanKey",
        )
    },
    "aws:cloudwatch/eventRule:EventRule": [
        "events:PutRule",
        "events:DescribeRule",
        "events:DeleteRule",
        "events:TagResource",
        "events:UntagResource",
        "events:ListTagsForResource",
    ],
    "aws:cloudwatch/eventTarget:EventTarget": [
        "events:PutTargets",
        "events:RemoveTargets",
        "events:ListTargetsByRule",
    ],
    "aws:sqs/queue:Queue": [
        "sqs:CreateQueue",
        "sqs:GetQueueAttributes",
        "sqs:SetQueueAttributes",
        "sqs:GetQueueUrl",
        "sqs:DeleteQueue",
        "sqs:TagQueue",
        "sqs:UntagQueue",
        "sqs:ListQueueTags",
    ],
    "aws:sqs/queuePolicy:QueuePolicy": ["sqs:SetQueueAttributes", "sqs:GetQueueAttributes"],
    "aws:cloudwatch/metricAlarm:MetricAlarm": [
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:DescribeAlarms",
        "cloudwatch:DeleteAlarms",
        "cloudwatch:TagResource",
        "cloudwatch:UntagResource",
        "cloudwatch:ListTagsForResource",
    ],
    "aws:cloudwatch/dashboard:Dashboard": [
        "cloudwatch:PutDashboard",
        "cloudwatch:GetDashboard",
        "cloudwatch:DeleteDashboards",
    ],
    "aws:s3/bucket:Bucket": BUCKET,
    "aws:s3/bucketVersioning:BucketVersioning": [
        "s3:GetBucketVersioning",
        "s3:PutBucketVersioning",
    ],
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": [
        "s3:GetLifecycleConfiguration",
        "s3:PutLifecycleConfiguration",
    ],
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": [
        "s3:GetEncryptionConfiguration",
        "s3:PutEncryptionConfiguration",
    ],
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": [
        "s3:GetBucketPublicAccessBlock",
        "s3:PutBucketPublicAccessBlock",
    ],
    "aws:s3/bucketNotification:BucketNotification": [
        "s3:GetBucketNotification",
        "s3:PutBucketNotification",
    ],
}


def allowed() -> set[str]:
    document = json.loads(POLICY.read_text())
    return {action for statement in document["Statement"] for action in statement["Action"]}


def stacks() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in ROOT.glob("Pulumi.*.yaml"))


# The e2e stack's own layer (demo/layer.py): a team brings its layers by ARN, publishing
# them is no deploy of the components'.
DEMO_ONLY = {"aws:lambda/layerVersion:LayerVersion"}


@pytest.fixture(scope="module")
def declared() -> set[str]:
    """Every AWS resource type a deploy declares: each stack (but DEMO_ONLY), and each
    component with every platform option (tracing, Step Functions logging's log groups,
    tags)."""
    types = {r.typ for stack in stacks() for r in run_stack(stack).resources} - DEMO_ONLY
    for kind in COMPONENTS:
        made = run(lambda kind=kind: component(kind, platform=EVERYTHING))
        types |= {r.typ for r in made.resources}
    return {typ for typ in types if typ.startswith("aws:")}


def test_every_declared_type_has_its_actions_in_the_policy(declared: set[str]) -> None:
    assert declared - NEEDS.keys() == set(), "a new resource type: list its actions in NEEDS"
    missing = {typ: sorted(set(NEEDS[typ]) - allowed()) for typ in declared}
    assert {typ: actions for typ, actions in missing.items() if actions} == {}


def test_the_policy_allows_nothing_no_declared_type_needs(declared: set[str]) -> None:
    needed = {action for typ in declared for action in NEEDS[typ]} | {"sts:GetCallerIdentity"}
    assert allowed() - needed == set()


def test_parliament_finds_nothing_unknown_in_the_policy() -> None:
    findings = analyze_policy_string(Path(POLICY).read_text()).findings
    unknown = [
        f
        for f in findings
        if f.issue in ("UNKNOWN_ACTION", "UNKNOWN_PREFIX", "MALFORMED")
        # Lambda's durable-execution actions are newer than parliament's database
        and not any(action in str(f.detail) for action in DURABLE_ACTIONS)
    ]
    assert unknown == [], [(f.issue, f.detail) for f in unknown]
