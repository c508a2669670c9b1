"""Pattern 2: a REST API whose mapping template calls StartExecution directly (no Lambda).

POST /start -> VTL sets `name` from the request -> states:StartExecution. Answers:
200 {"executionArn", "startDate", "duplicate": false} for a new execution; 409
{"duplicate": true} for a duplicate; 400 with a reason for a missing key or an
unusable name (nothing is started); 429 for throttling, 503 for Step Functions 5xx and
500 when the API's role may not start executions, so callers (EventBridge included)
retry. Optionally an EventBridge rule forwards S3 "Object Created" events to the API:
S3 -> EventBridge -> API Gateway -> Step Functions with no Lambda at all.
"""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
import dataclasses
import enum
import json
from typing import Any, Literal

import pulumi
import pulumi_aws as aws

from exactly_once.components import api_templates
from exactly_once.components.component import Component
from exactly_once.components.config import Defaulted, as_args
from exactly_once.components.event_patterns import s3_object_created_pattern
from exactly_once.components.functions import (
    allow,
    allow_eventbridge_to_queue,
    dead_letter_queue,
    service_role,
)
from exactly_once.components.monitoring import (
    Metric,
    MonitoringOptions,
    Watch,
)
from exactly_once.components.platform import PlatformOptions
from exactly_once.components.rest_api import api_key, fingerprint, stage_name
from exactly_once.components.roles import RoleOptions
from exactly_once.components.state_machines import (
    StateMachineType,
    StateMachineTypeName,
    require_standard,
    require_target,
    target_state_machine,
)
from exactly_once.handlers.settings import choice

PATH = "start"
# Where EventBridge delivers forwarded S3 events: AWS_IAM, signed with the rule's role, so
# no secret travels in the target's configuration.
EVENTS_PATH = "events"


class Authorization(enum.StrEnum):
    """Who may call the API: never anyone."""

    API_KEY = "API_KEY"
    AWS_IAM = "AWS_IAM"


AuthorizationName = Literal["API_KEY", "AWS_IAM"]  # its values (components/config.py)


JSON = "application/json"
# (selection pattern on Step Functions' HTTP status, method status, response template)
RESPONSES = (
    (None, "200", api_templates.SUCCESS_TEMPLATE),
    (r"4\d{2}", "400", api_templates.CLIENT_ERROR_TEMPLATE),
    (r"5\d{2}", "503", api_templates.SERVER_ERROR_TEMPLATE),
)
OVERRIDE_STATUSES = ("409", "429", "500")  # set by the templates through responseOverride


@dataclasses.dataclass
class ApiGatewayStarterArgs:
    """Either `state_machine_arn` or `definition`."""

    key_source: Defaulted[str] = "$.detail.object.key"
    """Where a request's key is: `$.json.path` into the body, or `header:Name`."""
    state_machine_arn: pulumi.Input[str] | None = None
    """The STANDARD state machine to start (yours)."""
    state_machine_type: Defaulted[StateMachineType | StateMachineTypeName] = (
        StateMachineType.STANDARD
    )
    """The type of that state machine: STANDARD (EXPRESS cannot deduplicate by name)."""
    definition: pulumi.Input[str] | None = None
    """Or the ASL (JSON) of a STANDARD state machine for the component to create."""
    authorization: Defaulted[Authorization | AuthorizationName] = Authorization.API_KEY
    """API_KEY (the key is an output) or AWS_IAM."""
    bucket_name: pulumi.Input[str] | None = None
    """Also route this bucket's S3 "Object Created" events here through EventBridge."""
    stage_name: Defaulted[str] = "v1"
    """The API's stage."""
    throttle_rate_limit: Defaulted[float] = 100
    """Steady requests per second the stage admits."""
    throttle_burst_limit: Defaulted[int] = 200
    """Burst of requests the stage admits."""

    roles: RoleOptions | None = None
    """Permissions boundary and path for every IAM role this component creates."""
    platform: PlatformOptions | None = None
    """Tags, X-Ray tracing, log retention and format, Step Functions logging, the logs'
    service name, and each function's settings, on everything this component creates
    (docs/platform.md)."""
    monitoring: MonitoringOptions | None = None
    """Metrics namespace, alarms (and whom they tell), dashboard (docs/operations.md)."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        self.state_machine_type = choice(
            StateMachineType, self.state_machine_type, "state_machine_type"
        )
        self.authorization = choice(Authorization, self.authorization, "authorization (never open)")
        require_standard(self.state_machine_type, "ApiGatewayStarter")
        require_target(self.state_machine_arn, self.definition, "ApiGatewayStarter")
        api_templates.key_expression(self.key_source)  # raises on a bad key source
        stage_name(self.stage_name)
        if self.bucket_name is not None and not self.key_source.startswith("$."):
            raise ValueError("bucket_name forwards S3 events: key_source must be a body path")


class ApiGatewayStarter(Component):
    """Pattern 2: POST /start, whose mapping template names the execution by the request's
    key (no Lambda): 200 for a new execution, 409 for a duplicate."""

    _kind = "ApiGatewayStarter"
    _functions = ()

    alarm_names: pulumi.Output[list[str]]
    """Its alarms (its 5xx answers, its DLQ not empty; docs/operations.md)."""
    dashboard_name: pulumi.Output[str] | None
    """Its CloudWatch dashboard (None with monitoring.dashboard off)."""

    api: aws.apigateway.RestApi
    """The REST API."""
    stage: aws.apigateway.Stage
    """Its stage."""
    url: pulumi.Output[str]
    """POST here to start."""
    api_key: pulumi.Output[str] | None
    """The API key (authorization API_KEY)."""
    state_machine_arn: pulumi.Output[str]
    """The state machine it starts."""
    dlq: aws.sqs.Queue | None
    """Forwarded S3 events that could not be delivered (with bucket_name)."""

    def __init__(
        self, name: str, args: ApiGatewayStarterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        args = as_args(ApiGatewayStarterArgs, args)  # a dict from the package host
        super().__init__(name, args.roles, args.platform, opts)
        self.state_machine_arn = target_state_machine(
            name, args.state_machine_arn, args.definition, self, self._platform
        )
        region = aws.get_region_output(opts=pulumi.InvokeOptions(parent=self)).region
        self.api = self._rest_api(name)
        role, ready = service_role(
            f"{name}-apigw",
            "apigateway.amazonaws.com",
            [allow(["states:StartExecution"], [self.state_machine_arn])],
            self,
        )
        validator, request_models, request_parameters = self._validation(name, args)
        validation = (validator, request_models, request_parameters)
        paths = [(PATH, "", Authorization(args.authorization))]
        if args.bucket_name is not None:
            paths.append((EVENTS_PATH, "-events", Authorization.AWS_IAM))
        pieces: list[pulumi.Resource] = [*ready]
        for path, label, authorization in paths:
            method, integration = self._start_method(
                name, args, region, path, label, authorization, role, ready, validation
            )
            pieces += self._responses(f"{name}{label}", method, integration)
        pieces += self._gateway_responses(name)
        self.stage = self._stage(name, args, pieces)
        self.url = self.stage.invoke_url.apply(lambda url: f"{url.rstrip('/')}/{PATH}")
        self.api_key = (
            api_key(
                name,
                self.api,
                self.stage,
                self,
                args.throttle_rate_limit,
                args.throttle_burst_limit,
            )
            if args.authorization == "API_KEY"
            else None
        )
        self.dlq = (
            self._forward_s3_events(name, args.bucket_name, region)
            if args.bucket_name is not None
            else None
        )
        self._finish(
            self._watch(name, args),
            {
                "url": self.url,
                "apiId": self.api.id,
                "stageName": self.stage.stage_name,
                "apiKey": self.api_key,
                "stateMachineArn": self.state_machine_arn,
                "dlqUrl": self.dlq.url if self.dlq is not None else None,
            },
        )

    def _watch(self, name: str, args: ApiGatewayStarterArgs) -> Watch:
        """No function of ours runs: API Gateway's and Step Functions' own metrics."""
        watch = Watch(name, "api-starter", args.monitoring, self)
        stage = {"ApiName": self.api.name, "Stage": self.stage.stage_name}

        def api(metric: str) -> Metric:
            return Metric("AWS/ApiGateway", metric, stage)

        watch.alarm(
            "server-errors",
            api("5XXError"),
            "POST /start answered 5xx (a throttled or failed StartExecution): the caller "
            "must retry with the same key",
        )
        if self.dlq is not None:
            watch.dead_letters(self.dlq)
        # 409 (a duplicate) is a 4xx: the 4XXError line counts duplicates and bad requests.
        watch.graph("Requests", [(api(m), "Sum") for m in ("Count", "4XXError", "5XXError")])
        started = Metric(
            "AWS/States", "ExecutionsStarted", {"StateMachineArn": self.state_machine_arn}
        )
        watch.graph("Executions started", [(started, "Sum")])
        return watch

    def _rest_api(self, name: str) -> aws.apigateway.RestApi:
        return aws.apigateway.RestApi(
            f"{name}-api",
            description="Starts a Step Functions execution once per request key",
            endpoint_configuration=aws.apigateway.RestApiEndpointConfigurationArgs(
                types="REGIONAL"
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _start_method(
        self,
        name: str,
        args: ApiGatewayStarterArgs,
        region: pulumi.Output[str],
        path: str,
        label: str,
        authorization: Authorization,
        role: aws.iam.Role,
        ready: list[pulumi.Resource],
        validation: tuple[aws.apigateway.RequestValidator, Any, Any],
    ) -> tuple[aws.apigateway.Method, aws.apigateway.Integration]:
        """POST /<path>: validated, then turned into StartExecution by the request template,
        with a role that may start only the target state machine."""
        validator, request_models, request_parameters = validation
        resource = aws.apigateway.Resource(
            f"{name}{label}-resource",
            rest_api=self.api.id,
            parent_id=self.api.root_resource_id,
            path_part=path,
            opts=pulumi.ResourceOptions(parent=self),
        )
        method = aws.apigateway.Method(
            f"{name}{label}-post",
            rest_api=self.api.id,
            resource_id=resource.id,
            http_method="POST",
            authorization="AWS_IAM" if authorization == Authorization.AWS_IAM else "NONE",
            api_key_required=authorization == Authorization.API_KEY,
            request_validator_id=validator.id,
            request_models=request_models,
            request_parameters=request_parameters,
            opts=pulumi.ResourceOptions(parent=self),
        )
        integration = aws.apigateway.Integration(
            f"{name}{label}-integration",
            rest_api=self.api.id,
            resource_id=resource.id,
            http_method=method.http_method,
            type="AWS",
            integration_http_method="POST",
            uri=region.apply(lambda r: f"arn:aws:apigateway:{r}:states:action/StartExecution"),
            credentials=role.arn,
            passthrough_behavior="NEVER",
            request_templates={
                JSON: self.state_machine_arn.apply(
                    lambda arn: api_templates.request_template(arn, args.key_source)
                )
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=ready),
        )
        return method, integration

    def _responses(
        self,
        name: str,
        method: aws.apigateway.Method,
        integration: aws.apigateway.Integration,
    ) -> list[pulumi.Resource]:
        """Step Functions' answers mapped to statuses (api_templates.RESPONSES); everything
        the deployment must wait for."""
        pieces: list[pulumi.Resource] = [method, integration]
        for status in ("200", "400", "503", *OVERRIDE_STATUSES):
            pieces.append(
                aws.apigateway.MethodResponse(
                    f"{name}-method-{status}",
                    rest_api=self.api.id,
                    resource_id=method.resource_id,
                    http_method=method.http_method,
                    status_code=status,
                    response_models={JSON: "Empty"},
                    opts=pulumi.ResourceOptions(parent=self),
                )
            )
        for pattern, status, template in RESPONSES:
            pieces.append(
                aws.apigateway.IntegrationResponse(
                    f"{name}-integration-{status}",
                    rest_api=self.api.id,
                    resource_id=method.resource_id,
                    http_method=method.http_method,
                    status_code=status,
                    selection_pattern=pattern,
                    response_templates={JSON: template},
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[integration, *pieces]),
                )
            )
        return pieces

    def _gateway_responses(self, name: str) -> list[pulumi.Resource]:
        """The validator's 400s, with a reason (api_templates.VALIDATION_ERROR_TEMPLATE)."""
        return [
            aws.apigateway.Response(
                f"{name}-{response_type.lower().replace('_', '-')}",
                rest_api_id=self.api.id,
                response_type=response_type,
                status_code="400",
                response_templates={JSON: api_templates.VALIDATION_ERROR_TEMPLATE},
                opts=pulumi.ResourceOptions(parent=self),
            )
            for response_type in ("BAD_REQUEST_BODY", "BAD_REQUEST_PARAMETERS")
        ]

    def _stage(
        self, name: str, args: ApiGatewayStarterArgs, pieces: list[pulumi.Resource]
    ) -> aws.apigateway.Stage:
        # A new deployment whenever anything the stage serves changes (templates, the state
        # machine and role they name, gateway responses, validation, authorization).
        deployment = aws.apigateway.Deployment(
            f"{name}-deployment",
            rest_api=self.api.id,
            triggers={"fingerprint": fingerprint(pieces)},
            opts=pulumi.ResourceOptions(parent=self, depends_on=pieces),
        )
        return aws.apigateway.Stage(
            f"{name}-stage",
            rest_api=self.api.id,
            deployment=deployment.id,
            stage_name=args.stage_name,
            xray_tracing_enabled=self._platform.options.tracing,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _validation(
        self, name: str, args: ApiGatewayStarterArgs
    ) -> tuple[aws.apigateway.RequestValidator, dict[str, Any] | None, dict[str, bool] | None]:
        """Reject a request without its key before Step Functions is called (400, a reason)."""
        schema = api_templates.body_schema(args.key_source)
        child = pulumi.ResourceOptions(parent=self)
        validator = aws.apigateway.RequestValidator(
            f"{name}-validator",
            rest_api=self.api.id,
            validate_request_body=schema is not None,
            validate_request_parameters=schema is None,
            opts=child,
        )
        if schema is None:
            header = args.key_source.removeprefix("header:")
            return validator, None, {f"method.request.header.{header}": True}
        model = aws.apigateway.Model(
            f"{name}-model",
            rest_api=self.api.id,
            name="StartRequest",
            content_type=JSON,
            schema=json.dumps(schema),
            opts=child,
        )
        return validator, {JSON: model.name}, None

    def _forward_s3_events(
        self, name: str, bucket_name: pulumi.Input[str], region: pulumi.Output[str]
    ) -> aws.sqs.Queue:
        """S3 -> EventBridge -> POST /events (AWS_IAM) of this API, the event as the body."""
        child = pulumi.ResourceOptions(parent=self)
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOptions(parent=self)).account_id
        target_arn = pulumi.Output.all(region, account, self.api.id, self.stage.stage_name).apply(
            lambda v: f"arn:aws:execute-api:{v[0]}:{v[1]}:{v[2]}/{v[3]}/POST/{EVENTS_PATH}"
        )
        role, ready = service_role(
            f"{name}-events",
            "events.amazonaws.com",
            [allow(["execute-api:Invoke"], [target_arn])],
            self,
        )
        rule = aws.cloudwatch.EventRule(
            f"{name}-rule", event_pattern=s3_object_created_pattern(bucket_name), opts=child
        )
        dlq = dead_letter_queue(name, self)
        allow_eventbridge_to_queue(name, dlq, rule.arn, self)
        # EventBridge signs the request with the role (execute-api:Invoke on the method's
        # ARN, EventBridge user guide "HTTP targets"): no key in the target's parameters.
        aws.cloudwatch.EventTarget(
            f"{name}-target",
            rule=rule.name,
            arn=target_arn,
            role_arn=role.arn,
            dead_letter_config=aws.cloudwatch.EventTargetDeadLetterConfigArgs(arn=dlq.arn),
            opts=pulumi.ResourceOptions(parent=self, depends_on=ready),
        )
        return dlq
