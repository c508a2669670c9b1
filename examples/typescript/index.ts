// The five components from TypeScript, through the component package.
//   pulumi package add <this repository>   (generates @pulumi/exactly-once into sdks/)
// Property names and types are checked against the package schema by
// tests/unit/test_package.py.
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import * as exactlyOnce from "@pulumi/exactly-once";

const config = new pulumi.Config();
const uploads = config.require("uploadsBucket"); // EventBridge notifications on
const workflowArn = config.require("stateMachineArn"); // your STANDARD state machine
const emailFunctionArn = config.require("emailFunctionArn");
const stepArn = (name: string) => config.require(`${name}FunctionArn`);

// 1. One execution per uploaded object version, however often EventBridge delivers it.
const starter = new exactlyOnce.NameDedupStarter("uploads-starter", {
    bucketName: uploads,
    stateMachineArn: workflowArn,
    keyStrategy: "bucket-key-version",
    reusePolicy: "ALLOW_DUPLICATE_FAILED_ONLY",
    timeout: 30,
});

// 2. The same through a REST API with no Lambda: POST /start {"orderId": ...}.
const api = new exactlyOnce.ApiGatewayStarter("orders-api", {
    keySource: "$.orderId",
    stateMachineArn: workflowArn,
    authorization: "API_KEY",
    throttleRateLimit: 50,
});

// 3. Messages registered by API, each fired once at its time.
const scheduler = new exactlyOnce.Scheduler("reminders", {
    channels: { email: emailFunctionArn },
    sweepPeriodMinutes: 60,
    windowMinutes: 65,
});

// 4. A workflow that, re-run after a failure, skips the steps that succeeded.
const orders = new exactlyOnce.ResumableWorkflow("orders", {
    keyPath: "$.orderId",
    steps: [
        { name: "reserve", function: stepArn("reserve") },
        { name: "charge", function: stepArn("charge"), retry: [{ errorEquals: ["Timeout"], maxAttempts: 2 }] },
        { name: "ship", function: stepArn("ship") },
    ],
});

// 5. Your transform on every upload, one output per object version. The transform's
// folder is bundled into the function: give it as an absolute path.
const etl = new exactlyOnce.IdempotentEtl("invoices", {
    transform: "etl_transforms.csv_jsonl:transform",
    transformSource: path.resolve(__dirname, "../etl"),
    transformEnvironment: { CSV_SCHEMA: '{"id": "int", "amount": "float"}' },
    outputSuffix: ".jsonl",
    contentType: "application/x-ndjson",
    inputBucketName: uploads,
    inputPrefix: "invoices/",
    trigger: "eventbridge",
    strategy: "conditional-write",
});

export const startUrl = api.url;
export const schedulerUrl = scheduler.url;
export const ordersStateMachine = orders.stateMachine.arn;
export const starterDlq = starter.dlq.url;
export const etlOutputs = etl.outputBucketName;
