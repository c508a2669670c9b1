"""exactly_once.testing as a user's own program meets it: the provider functions it calls
answered as the provider answers, names it shares with our resources told apart, and the
transforms note of docs/testing.md held to the installed Pulumi."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest

from exactly_once import testing
from exactly_once.components.scheduler import Scheduler, SchedulerArgs

TARGET = "arn:aws:lambda:us-east-1:123456789012:function:send-email"
Statement = aws.iam.GetPolicyDocumentStatementArgs
Principal = aws.iam.GetPolicyDocumentStatementPrincipalArgs
NotPrincipal = aws.iam.GetPolicyDocumentStatementNotPrincipalArgs
Condition = aws.iam.GetPolicyDocumentStatementConditionArgs


def document(**args: Any) -> aws.iam.GetPolicyDocumentResult:
    """What get_policy_document answers a program under the mocks."""
    answers: list[aws.iam.GetPolicyDocumentResult] = []
    testing.run(lambda: answers.append(aws.iam.get_policy_document(**args)))
    return answers[0]


def test_a_role_trusting_lambda_through_get_policy_document_is_declared() -> None:
    # GIVEN a program's own role whose trust policy is a get_policy_document's json
    def program() -> None:
        trust = aws.iam.get_policy_document(
            statements=[
                Statement(
                    actions=["sts:AssumeRole"],
                    principals=[Principal(type="Service", identifiers=["lambda.amazonaws.com"])],
                )
            ]
        )
        aws.iam.Role("worker", assume_role_policy=trust.json)

    # WHEN it runs under the mocks (it failed: "Missing required property
    # 'assume_role_policy'", the json answered None)
    mocks = testing.run(program)
    # THEN the role has the document the provider writes, to the character
    assert mocks.named("worker").inputs["assumeRolePolicy"] == (
        "{\n"
        '  "Version": "2012-10-17",\n'
        '  "Statement": [\n'
        "    {\n"
        '      "Effect": "Allow",\n'
        '      "Action": "sts:AssumeRole",\n'
        '      "Principal": {\n'
        '        "Service": "lambda.amazonaws.com"\n'
        "      }\n"
        "    }\n"
        "  ]\n"
        "}"
    )


def test_a_statement_is_written_as_the_provider_writes_it() -> None:
    answer = document(
        policy_id="uploads",
        statements=[
            Statement(
                sid="OwnFolder",
                actions=["s3:GetObject", "s3:PutObject", "s3:GetObject"],
                resources=["arn:aws:s3:::uploads/&{aws:username}/*"],
                principals=[
                    Principal(type="AWS", identifiers=["arn:aws:iam::111111111111:root"]),
                    Principal(type="AWS", identifiers=["222222222222", "111111111111"]),
                ],
                conditions=[
                    Condition(test="StringLike", variable="s3:prefix", values=["", "home/"]),
                    Condition(test="Bool", variable="aws:SecureTransport", values=["true"]),
                    Condition(test="StringLike", variable="s3:prefix", values=["b/"]),
                ],
            ),
            Statement(
                effect="Deny",
                not_actions=["iam:*"],
                not_resources=["*"],
                not_principals=[NotPrincipal(type="*", identifiers=["*"])],
            ),
            Statement(actions=["sqs:*"], principals=[Principal(type="AWS", identifiers=["*"])]),
        ],
    )
    assert json.loads(answer.json) == {
        "Version": "2012-10-17",
        "Id": "uploads",
        "Statement": [
            {
                "Sid": "OwnFolder",
                "Effect": "Allow",
                # a set: each once, in the provider's (reverse) order
                "Action": ["s3:PutObject", "s3:GetObject"],
                # one alone: a string; Terraform's &{ escape made ${
                "Resource": "arn:aws:s3:::uploads/${aws:username}/*",
                # a type given twice: one list, each block's identifiers in reverse order
                "Principal": {
                    "AWS": ["arn:aws:iam::111111111111:root", "222222222222", "111111111111"]
                },
                # {test: {variable: values}}, tests and variables in order, values as given
                "Condition": {
                    "Bool": {"aws:SecureTransport": "true"},
                    "StringLike": {"s3:prefix": ["", "home/", "b/"]},
                },
            },
            {"Effect": "Deny", "NotAction": "iam:*", "NotResource": "*", "NotPrincipal": "*"},
            # {"AWS": "*"} is not "*" (IAM refuses "*" in a trust policy)
            {"Effect": "Allow", "Action": "sqs:*", "Principal": {"AWS": "*"}},
        ],
    }
    # AND minified, and its id the provider's hash of the indented text
    assert answer.minified_json == json.dumps(json.loads(answer.json), separators=(",", ":"))
    assert answer.id == str(zlib.crc32(answer.json.encode()))
    assert answer.version == "2012-10-17" and answer.policy_id == "uploads"


def test_source_and_override_documents_merge_by_sid() -> None:
    source = {
        "Version": "2008-10-17",
        "Statement": [
            {"Sid": "Read", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"},
            {"Effect": "Allow", "Action": ["b", "a"], "Principal": {"AWS": ["1", "2"]}},
        ],
    }
    override = {"Statement": [{"Sid": "Write", "Effect": "Deny", "Action": "s3:PutObject"}]}
    answer = document(
        source_policy_documents=[json.dumps(source)],
        statements=[
            Statement(sid="Read", actions=["s3:GetObject"], resources=["arn:aws:s3:::b/*"]),
            Statement(sid="Write", actions=["s3:PutObject"], resources=["arn:aws:s3:::b/*"]),
        ],
        override_policy_documents=[json.dumps(override)],
    )
    assert json.loads(answer.json) == {
        "Version": "2012-10-17",  # the later of the documents'
        "Statement": [
            # the statements replace the source's of their Sid, where it stood
            {
                "Sid": "Read",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": "arn:aws:s3:::b/*",
            },
            # a source statement as the provider reads it back: identifiers in its order
            {"Effect": "Allow", "Action": ["b", "a"], "Principal": {"AWS": ["2", "1"]}},
            # and the override replaces theirs
            {"Sid": "Write", "Effect": "Deny", "Action": "s3:PutObject"},
        ],
    }


def test_a_duplicate_sid_is_refused_as_the_provider_refuses_it() -> None:
    with pytest.raises(Exception, match=r"duplicate Sid \(Twice\)"):
        document(statements=[Statement(sid="Twice", actions=["a"]) for _ in "ab"])


def test_get_policy_document_output_takes_another_resources_outputs() -> None:
    def program() -> None:
        queue = aws.sqs.Queue("jobs")
        allowed = aws.iam.get_policy_document_output(
            statements=queue.arn.apply(
                lambda arn: [Statement(actions=["sqs:SendMessage"], resources=[arn])]
            )
        )
        aws.iam.Policy("send", policy=allowed.json)

    mocks = testing.run(program)
    assert json.loads(mocks.named("send").inputs["policy"])["Statement"] == [
        {
            "Effect": "Allow",
            "Action": "sqs:SendMessage",
            "Resource": testing.arn_of("aws:sqs/queue:Queue", "jobs"),
        }
    ]


def test_the_other_provider_functions_keep_their_answers() -> None:
    answers: list[Any] = []
    testing.run(lambda: answers.extend([aws.get_region(), aws.get_caller_identity()]))
    region, identity = answers
    assert region.region == testing.REGION and identity.account_id == testing.ACCOUNT


@pytest.fixture(scope="module")
def scheduler() -> testing.Mocks:
    """A Scheduler, whose "reminders-api" is its RestApi and its Function."""
    return testing.run(lambda: Scheduler("reminders", SchedulerArgs({"email": TARGET})))


def test_a_name_two_resources_share_is_picked_by_type(scheduler: testing.Mocks) -> None:
    api = scheduler.named("reminders-api", type="aws:apigateway/restApi:RestApi")
    function = scheduler.named("reminders-api", type="Function")  # the token's last part
    assert (api.typ, function.typ) == (
        "aws:apigateway/restApi:RestApi",
        "aws:lambda/function:Function",
    )
    assert scheduler.named("reminders-slots").typ == "aws:lambda/function:Function"


def test_without_type_the_error_names_the_types_to_choose_from(
    scheduler: testing.Mocks,
) -> None:
    with pytest.raises(KeyError) as raised:
        scheduler.named("reminders-api")
    message = str(raised.value)
    assert "2 resources named 'reminders-api'" in message and "type=" in message
    assert "aws:apigateway/restApi:RestApi, aws:lambda/function:Function" in message
    # a type none of them is: the types there are
    with pytest.raises(KeyError, match=r"of type 'Queue' .*restApi:RestApi"):
        scheduler.named("reminders-api", type="Queue")
    # a name nothing has: the names there are
    with pytest.raises(KeyError, match=r"no resource named 'nothing' .*reminders-api"):
        scheduler.named("nothing")


def test_legacy_transformations_run_under_the_mocks_and_transforms_do_not() -> None:
    """docs/testing.md's note, held to the installed Pulumi: `transformations` are run by
    the Python SDK itself; `transforms` are the engine's, handed to the mocks unrun."""

    def tagged(by: str) -> dict[str, Any]:
        return {"tags": {"by": by}}

    def legacy(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult:
        return pulumi.ResourceTransformationResult({**args.props, **tagged("legacy")}, args.opts)

    def new(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult:
        return pulumi.ResourceTransformResult({**args.props, **tagged("new")}, args.opts)

    def program() -> None:
        aws.sqs.Queue("legacy", opts=pulumi.ResourceOptions(transformations=[legacy]))
        aws.sqs.Queue("new", opts=pulumi.ResourceOptions(transforms=[new]))

    mocks = testing.run(program)
    assert mocks.named("legacy").inputs["tags"] == {"by": "legacy"}
    assert "tags" not in mocks.named("new").inputs
    assert len(mocks.named("new").transforms) == 1  # (there, for a Mocks of yours to run)
