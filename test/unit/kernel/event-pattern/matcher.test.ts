/**
 * Matching behaviour of our EventBridge event-pattern matcher, case by case through the examples
 * of the EventBridge user guide (event patterns, comparison operators, content filtering, arrays,
 * null and empty values). Each case: the guide's pattern, events that must match, events that must not.
 */
import { describe, expect, it } from "vitest";
import {
  compilePattern,
  type EventPattern,
  matchesPattern,
  validatePattern,
} from "../../../../shared/kernel/event-pattern/index.ts";

type Case = {
  readonly name: string;
  readonly pattern: EventPattern;
  readonly match: readonly unknown[];
  readonly noMatch: readonly unknown[];
};

type Row = {
  readonly title: string;
  readonly pattern: EventPattern;
  readonly event: unknown;
  readonly expected: boolean;
};

function rows(cases: readonly Case[]): Row[] {
  const show = (event: unknown) => (event === undefined ? "undefined" : JSON.stringify(event));
  return cases.flatMap((c) => [
    ...c.match.map((event) => ({
      title: `${c.name} ✓ ${show(event)}`,
      pattern: c.pattern,
      event,
      expected: true,
    })),
    ...c.noMatch.map((event) => ({
      title: `${c.name} ✗ ${show(event)}`,
      pattern: c.pattern,
      event,
      expected: false,
    })),
  ]);
}

function check(cases: readonly Case[]): void {
  it.each(rows(cases))("$title", ({ pattern, event, expected }) => {
    expect(matchesPattern(pattern, event)).toBe(expected);
  });
}

const detail = (fields: Record<string, unknown>) => ({ source: "my.app", detail: fields });

const ec2Event = {
  version: "0",
  id: "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
  "detail-type": "EC2 Instance State-change Notification",
  source: "aws.ec2",
  account: "111122223333",
  time: "2017-12-22T18:43:48Z",
  region: "us-west-1",
  resources: ["arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0"],
  detail: { "instance-id": "i-1234567890abcdef0", state: "terminated" },
};

describe("event patterns: structure (eb-event-patterns)", () => {
  check([
    {
      name: "EC2 termination: source AND detail-type AND detail.state",
      pattern: {
        source: ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
        detail: { state: ["terminated"] },
      },
      match: [ec2Event],
      noMatch: [
        { ...ec2Event, source: "aws.s3" },
        { ...ec2Event, detail: { state: "running" } },
        { ...ec2Event, detail: undefined },
        { ...ec2Event, detail: "terminated" },
        { source: "aws.ec2", "detail-type": "EC2 Instance State-change Notification" },
      ],
    },
    {
      name: "several values are OR",
      pattern: { source: ["aws.ec2", "aws.fargate"] },
      match: [{ source: "aws.ec2" }, { source: "aws.fargate" }],
      noMatch: [{ source: "aws.s3" }, { source: "AWS.EC2" }, {}],
    },
    {
      name: "fields absent from the pattern are ignored",
      pattern: { detail: { state: ["terminated"] } },
      match: [ec2Event, { detail: { state: "terminated", extra: { deep: [1, 2] } } }],
      noMatch: [{ detail: { State: "terminated" } }],
    },
    {
      name: "non-object events never match",
      pattern: { detail: { x: [{ exists: false }] } },
      match: [{}],
      noMatch: [null, undefined, "event", 42, [{ detail: {} }]],
    },
  ]);
});

describe("comparison operators (eb-create-pattern-operators)", () => {
  check([
    {
      name: "And",
      pattern: { Location: ["New York"], Day: ["Monday"] },
      match: [{ Location: "New York", Day: "Monday" }],
      noMatch: [{ Location: "New York", Day: "Tuesday" }, { Location: "New York" }, { Day: "Monday" }],
    },
    {
      name: "Anything-but",
      pattern: { state: [{ "anything-but": "initializing" }] },
      match: [{ state: "running" }, { state: "" }, { state: 5 }, { state: null }, { state: "INITIALIZING" }],
      noMatch: [{ state: "initializing" }, {}, { state: { nested: "x" } }],
    },
    {
      name: "Anything-but (begins with)",
      pattern: { Region: [{ "anything-but": { prefix: "us-" } }] },
      match: [{ Region: "eu-west-1" }, { Region: "US-EAST-1" }, { Region: "us" }],
      noMatch: [{ Region: "us-east-1" }, { Region: "us-" }, {}],
    },
    {
      name: "Anything-but (ends with)",
      pattern: { FileName: [{ "anything-but": { suffix: ".png" } }] },
      match: [{ FileName: "image.jpg" }, { FileName: "image.PNG" }, { FileName: "png" }],
      noMatch: [{ FileName: "image.png" }, { FileName: ".png" }],
    },
    {
      name: "Anything-but (ignore case)",
      pattern: { state: [{ "anything-but": { "equals-ignore-case": "initializing" } }] },
      match: [{ state: "running" }, { state: "initializing-done" }],
      noMatch: [{ state: "initializing" }, { state: "INITIALIZING" }, { state: "Initializing" }],
    },
    {
      name: "Anything-but using a wildcard",
      pattern: { FilePath: [{ "anything-but": { wildcard: "*/lib/*" } }] },
      match: [{ FilePath: "/usr/bin/env" }, { FilePath: "lib/x" }, { FilePath: "/usr/LIB/x" }],
      noMatch: [{ FilePath: "/usr/lib/libc.so" }, { FilePath: "a/lib/" }],
    },
    {
      name: "Begins with",
      pattern: { Region: [{ prefix: "us-" }] },
      match: [{ Region: "us-east-1" }, { Region: "us-" }],
      noMatch: [{ Region: "eu-west-1" }, { Region: "US-EAST-1" }, { Region: 1 }, {}],
    },
    {
      name: "Begins with (ignore case)",
      pattern: { service: [{ prefix: { "equals-ignore-case": "eventb" } }] },
      match: [{ service: "EventBridge" }, { service: "EVENTBRIDGE" }, { service: "eventbus" }],
      noMatch: [{ service: "events" }, { service: "my-eventbridge" }],
    },
    {
      name: "Empty",
      pattern: { LastName: [""] },
      match: [{ LastName: "" }],
      noMatch: [{ LastName: null }, { LastName: " " }, { LastName: "Doe" }, {}],
    },
    {
      name: "Equals",
      pattern: { Name: ["Alice"] },
      match: [{ Name: "Alice" }, { Name: ["Bob", "Alice"] }],
      noMatch: [{ Name: "alice" }, { Name: "Alice " }, { Name: { first: "Alice" } }],
    },
    {
      name: "Equals (ignore case)",
      pattern: { Name: [{ "equals-ignore-case": "alice" }] },
      match: [{ Name: "Alice" }, { Name: "ALICE" }, { Name: "alice" }],
      noMatch: [{ Name: "Alicia" }, { Name: "alice smith" }],
    },
    {
      name: "Ends with",
      pattern: { FileName: [{ suffix: ".png" }] },
      match: [{ FileName: "photo.png" }, { FileName: ".png" }],
      noMatch: [{ FileName: "photo.PNG" }, { FileName: "photo.png.txt" }],
    },
    {
      name: "Ends with (ignore case)",
      pattern: { service: [{ suffix: { "equals-ignore-case": "tbridge" } }] },
      match: [{ service: "EventBridge" }, { service: "EVENTBRIDGE" }],
      noMatch: [{ service: "EventBus" }],
    },
    {
      name: "Exists",
      pattern: { ProductName: [{ exists: true }] },
      match: [{ ProductName: "Widget" }, { ProductName: "" }, { ProductName: null }, { ProductName: [1] }],
      noMatch: [{}, { ProductName: { id: 1 } }, { ProductName: [] }, { productname: "Widget" }],
    },
    {
      name: "Does not exist",
      pattern: { ProductName: [{ exists: false }] },
      match: [{}, { ProductName: { id: 1 } }, { ProductName: [] }],
      noMatch: [{ ProductName: "Widget" }, { ProductName: null }, { ProductName: [1] }],
    },
    {
      name: "Not",
      pattern: { Weather: [{ "anything-but": ["Raining"] }] },
      match: [{ Weather: "Sunny" }, { Weather: "raining" }],
      noMatch: [{ Weather: "Raining" }, {}],
    },
    {
      name: "Null",
      pattern: { UserID: [null] },
      match: [{ UserID: null }, { UserID: ["u-1", null] }],
      noMatch: [{ UserID: "null" }, { UserID: "" }, {}],
    },
    {
      name: "Numeric (equals)",
      pattern: { Price: [{ numeric: ["=", 100] }] },
      match: [{ Price: 100 }, { Price: 100.0 }, { Price: 1e2 }],
      noMatch: [{ Price: "100" }, { Price: 100.5 }, { Price: 99 }, {}],
    },
    {
      name: "Numeric (range)",
      pattern: { Price: [{ numeric: [">", 10, "<=", 20] }] },
      match: [{ Price: 10.5 }, { Price: 20 }, { Price: 15 }],
      noMatch: [{ Price: 10 }, { Price: 20.01 }, { Price: "15" }, { Price: true }],
    },
    {
      name: "Or (values)",
      pattern: { PaymentType: ["Credit", "Debit"] },
      match: [{ PaymentType: "Credit" }, { PaymentType: "Debit" }],
      noMatch: [{ PaymentType: "Cash" }],
    },
    {
      name: "Or (multiple fields, $or)",
      pattern: { $or: [{ Location: ["New York"] }, { Day: ["Monday"] }] },
      match: [
        { Location: "New York", Day: "Tuesday" },
        { Location: "Boston", Day: "Monday" },
        { Location: "New York" },
      ],
      noMatch: [{ Location: "Boston", Day: "Sunday" }, {}],
    },
    {
      name: "Wildcard",
      pattern: { FileName: [{ wildcard: "dir/*.png" }] },
      match: [{ FileName: "dir/a.png" }, { FileName: "dir/sub/a.png" }, { FileName: "dir/.png" }],
      noMatch: [{ FileName: "other/a.png" }, { FileName: "dir/a.jpg" }, { FileName: "xdir/a.png" }],
    },
  ]);
});

describe("content filtering (eb-event-patterns-content-based-filtering)", () => {
  check([
    {
      name: "prefix on time",
      pattern: { time: [{ prefix: "2017-10-02" }] },
      match: [{ time: "2017-10-02T18:43:48Z" }],
      noMatch: [{ time: "2017-10-03T18:43:48Z" }, { time: "x2017-10-02" }],
    },
    {
      name: "prefix ignoring case under detail",
      pattern: { detail: { service: [{ prefix: { "equals-ignore-case": "EventB" } }] } },
      match: [
        detail({ service: "EventBridge" }),
        detail({ service: "EVENTB" }),
        detail({ service: "eventb" }),
      ],
      noMatch: [detail({ service: "Event" }), detail({})],
    },
    {
      name: "suffix ignoring case under detail",
      pattern: { detail: { FileName: [{ suffix: { "equals-ignore-case": ".png" } }] } },
      match: [detail({ FileName: "a.png" }), detail({ FileName: "a.PNG" }), detail({ FileName: "a.Png" })],
      noMatch: [detail({ FileName: "a.jpg" })],
    },
    {
      name: "anything-but a number",
      pattern: { detail: { "x-limit": [{ "anything-but": 123 }] } },
      match: [detail({ "x-limit": 124 }), detail({ "x-limit": "123" })],
      noMatch: [detail({ "x-limit": 123 }), detail({ "x-limit": 123.0 }), detail({})],
    },
    {
      name: "anything-but a list of strings",
      pattern: { detail: { state: [{ "anything-but": ["stopped", "overloaded"] }] } },
      match: [detail({ state: "running" })],
      noMatch: [detail({ state: "stopped" }), detail({ state: "overloaded" })],
    },
    {
      name: "anything-but a list of numbers",
      pattern: { detail: { "x-limit": [{ "anything-but": [100, 200, 300] }] } },
      match: [detail({ "x-limit": 150 }), detail({ "x-limit": 300.5 })],
      noMatch: [detail({ "x-limit": 100 }), detail({ "x-limit": 200 }), detail({ "x-limit": 3e2 })],
    },
    {
      name: "anything-but prefix",
      pattern: { detail: { state: [{ "anything-but": { prefix: "init" } }] } },
      match: [detail({ state: "running" }), detail({ state: "pre-init" })],
      noMatch: [detail({ state: "initializing" }), detail({ state: "init" })],
    },
    {
      name: "anything-but suffix",
      pattern: { detail: { FileName: [{ "anything-but": { suffix: ".txt" } }] } },
      match: [detail({ FileName: "notes.md" })],
      noMatch: [detail({ FileName: "notes.txt" })],
    },
    {
      name: "anything-but equals-ignore-case list",
      pattern: {
        detail: { state: [{ "anything-but": { "equals-ignore-case": ["initializing", "stopped"] } }] },
      },
      match: [detail({ state: "running" })],
      noMatch: [detail({ state: "STOPPED" }), detail({ state: "Initializing" })],
    },
    {
      name: "anything-but wildcard list",
      pattern: { detail: { FilePath: [{ "anything-but": { wildcard: ["*/lib/*", "*/bin/*"] } }] } },
      match: [detail({ FilePath: "/home/me/file" })],
      noMatch: [detail({ FilePath: "/usr/lib/a" }), detail({ FilePath: "/usr/bin/a" })],
    },
    {
      name: "numeric matching on three fields",
      pattern: {
        detail: {
          "c-count": [{ numeric: [">", 0, "<=", 5] }],
          "d-count": [{ numeric: ["<", 10] }],
          "x-limit": [{ numeric: ["=", 3.018e2] }],
        },
      },
      match: [
        detail({ "c-count": 5, "d-count": 3, "x-limit": 301.8 }),
        detail({ "c-count": 0.1, "d-count": -7, "x-limit": 301.8 }),
      ],
      noMatch: [
        detail({ "c-count": 0, "d-count": 3, "x-limit": 301.8 }),
        detail({ "c-count": 5, "d-count": 10, "x-limit": 301.8 }),
        detail({ "c-count": 5, "d-count": 3, "x-limit": "301.8" }),
        detail({ "c-count": 5, "x-limit": 301.8 }),
      ],
    },
    {
      name: "numeric >= and <",
      pattern: { n: [{ numeric: [">=", 0, "<", 1] }] },
      match: [{ n: 0 }, { n: 0.999999 }, { n: [5, 0.5] }],
      noMatch: [{ n: 1 }, { n: -0.000001 }, { n: [5, 1] }],
    },
    {
      name: "IPv4 cidr",
      pattern: { detail: { sourceIPAddress: [{ cidr: "10.0.0.0/24" }] } },
      match: [detail({ sourceIPAddress: "10.0.0.0" }), detail({ sourceIPAddress: "10.0.0.255" })],
      noMatch: [
        detail({ sourceIPAddress: "10.0.1.0" }),
        detail({ sourceIPAddress: "10.0.0.256" }),
        detail({ sourceIPAddress: "not-an-ip" }),
        detail({ sourceIPAddress: "::ffff:10.0.0.1" }),
        detail({ sourceIPAddress: 167772161 }),
      ],
    },
    {
      name: "IPv4 cidr with a mask inside a byte",
      pattern: { ip: [{ cidr: "192.168.10.0/20" }] },
      match: [{ ip: "192.168.0.1" }, { ip: "192.168.15.255" }],
      noMatch: [{ ip: "192.168.16.0" }, { ip: "192.169.0.1" }],
    },
    {
      name: "IPv6 cidr",
      pattern: { detail: { sourceIPAddress: [{ cidr: "2001:db8:1::/48" }] } },
      match: [
        detail({ sourceIPAddress: "2001:db8:1::1" }),
        detail({ sourceIPAddress: "2001:DB8:1:ffff:ffff:ffff:ffff:ffff" }),
        detail({ sourceIPAddress: "2001:0db8:0001:0000:0000:0000:0000:0000" }),
      ],
      noMatch: [
        detail({ sourceIPAddress: "2001:db8:2::1" }),
        detail({ sourceIPAddress: "10.0.0.1" }),
        detail({ sourceIPAddress: "2001:db8:1::1::1" }),
      ],
    },
    {
      name: "IPv6 cidr with an embedded IPv4 address",
      pattern: { ip: [{ cidr: "::ffff:10.0.0.0/120" }] },
      match: [{ ip: "::ffff:10.0.0.7" }, { ip: "0:0:0:0:0:ffff:a00:1" }],
      noMatch: [{ ip: "10.0.0.7" }, { ip: "::ffff:10.0.1.7" }],
    },
    {
      name: "exists true",
      pattern: { detail: { state: [{ exists: true }] } },
      match: [{ ...ec2Event, detail: { "instance-id": "i-abcd1111", state: "pending" } }],
      noMatch: [{ detail: { "c-count": { c1: 100 } } }, {}],
    },
    {
      name: "exists false (only leaf nodes exist)",
      pattern: { detail: { "c-count": [{ exists: false }] } },
      match: [
        { detail: { state: ["initializing", "running"] } },
        { detail: { state: ["initializing", "running"], "c-count": { c1: 100 } } },
        {},
        { detail: "a string" },
      ],
      noMatch: [{ detail: { "c-count": 5 } }, { detail: { "c-count": null } }],
    },
    {
      name: "complex example: prefix, anything-but, numeric",
      pattern: {
        time: [{ prefix: "2017-10-02" }],
        detail: {
          state: [{ "anything-but": "initializing" }],
          "c-count": [{ numeric: [">", 0, "<=", 5] }],
          "d-count": [{ numeric: ["<", 10] }],
          "x-limit": [{ "anything-but": [100, 200, 300] }],
        },
      },
      match: [
        {
          time: "2017-10-02T16:24:49Z",
          detail: { state: "running", "c-count": 5, "d-count": 3, "x-limit": 301.8 },
        },
      ],
      noMatch: [
        {
          time: "2017-10-03T16:24:49Z",
          detail: { state: "running", "c-count": 5, "d-count": 3, "x-limit": 301.8 },
        },
        {
          time: "2017-10-02T16:24:49Z",
          detail: { state: "initializing", "c-count": 5, "d-count": 3, "x-limit": 1 },
        },
        {
          time: "2017-10-02T16:24:49Z",
          detail: { state: "running", "c-count": 5, "d-count": 3, "x-limit": 200 },
        },
      ],
    },
    {
      name: "$or of numeric conditions under detail",
      pattern: {
        detail: {
          $or: [
            { "c-count": [{ numeric: [">", 0, "<=", 5] }] },
            { "d-count": [{ numeric: ["<", 10] }] },
            { "x-limit": [{ numeric: ["=", 3.018e2] }] },
          ],
        },
      },
      match: [detail({ "c-count": 1 }), detail({ "d-count": 9 }), detail({ "x-limit": 301.8 })],
      noMatch: [detail({ "c-count": 6, "d-count": 10, "x-limit": 1 }), detail({})],
    },
    {
      name: "$or combined with a sibling key",
      pattern: {
        source: ["aws.cloudwatch"],
        $or: [{ metricName: ["CPUUtilization", "ReadLatency"] }, { namespace: ["AWS/EC2", "AWS/ES"] }],
      },
      match: [
        { source: "aws.cloudwatch", metricName: "ReadLatency" },
        { source: "aws.cloudwatch", namespace: "AWS/ES" },
      ],
      noMatch: [
        { source: "aws.ec2", metricName: "ReadLatency" },
        { source: "aws.cloudwatch", namespace: "AWS/S3" },
      ],
    },
    {
      name: "nested $or with an AND inside",
      pattern: {
        source: ["aws.cloudwatch"],
        $or: [
          { metricName: ["CPUUtilization"] },
          {
            metricType: ["MetricType"],
            namespace: ["AWS/EC2"],
            $or: [{ metricId: [1234] }, { spaceId: [1000] }],
          },
        ],
      },
      match: [
        { source: "aws.cloudwatch", metricName: "CPUUtilization" },
        { source: "aws.cloudwatch", metricType: "MetricType", namespace: "AWS/EC2", spaceId: 1000 },
      ],
      noMatch: [
        { source: "aws.cloudwatch", metricType: "MetricType", namespace: "AWS/EC2" },
        { source: "aws.cloudwatch", metricType: "MetricType", namespace: "AWS/ES", metricId: 1234 },
      ],
    },
  ]);
});

describe("wildcard details", () => {
  check([
    {
      name: "ARN wildcard",
      pattern: { EventBusArn: [{ wildcard: "arn:aws:events:us-east-1:*:event-bus/*" }] },
      match: [{ EventBusArn: "arn:aws:events:us-east-1:123456789012:event-bus/default" }],
      noMatch: [{ EventBusArn: "arn:aws:events:us-west-2:123456789012:event-bus/default" }],
    },
    {
      name: "a lone * matches any string, even empty",
      pattern: { s: [{ wildcard: "*" }] },
      match: [{ s: "" }, { s: "anything" }],
      noMatch: [{ s: 1 }, { s: null }, {}],
    },
    {
      name: "several *",
      pattern: { s: [{ wildcard: "a*b*c" }] },
      match: [{ s: "abc" }, { s: "a-b-c" }, { s: "abbbc" }, { s: "acbc" }],
      noMatch: [{ s: "ab" }, { s: "acb" }, { s: "xabc" }, { s: "abcx" }],
    },
    {
      name: "a middle part may not overlap the final part",
      pattern: { s: [{ wildcard: "a*b*b" }] },
      match: [{ s: "abb" }, { s: "axbyb" }],
      noMatch: [{ s: "ab" }],
    },
    {
      name: "no * is an exact match",
      pattern: { s: [{ wildcard: "plain" }] },
      match: [{ s: "plain" }],
      noMatch: [{ s: "plainer" }, { s: "Plain" }],
    },
    {
      name: "\\* is a literal star",
      pattern: { s: [{ wildcard: "a\\*b" }] },
      match: [{ s: "a*b" }],
      noMatch: [{ s: "axb" }, { s: "ab" }],
    },
    {
      name: "\\\\ is a literal backslash, \\** a literal star then a wildcard",
      pattern: { s: [{ wildcard: "c:\\\\*" }], t: [{ wildcard: "\\**" }] },
      match: [
        { s: "c:\\temp", t: "*tail" },
        { s: "c:\\", t: "*" },
      ],
      noMatch: [
        { s: "c:temp", t: "*" },
        { s: "c:\\x", t: "tail" },
      ],
    },
  ]);
});

describe("arrays (eb-event-patterns-arrays)", () => {
  const arn = (account: string) => `arn:aws:ec2:us-east-1:${account}:instance/i-b188560f`;
  check([
    {
      name: "pattern array intersects event array",
      pattern: { resources: [arn("123456789012"), arn("111122223333"), arn("444455556666")] },
      match: [
        {
          resources: [
            "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:eb56d16b:autoScalingGroupName/ASGTerminate",
            arn("123456789012"),
          ],
        },
        { resources: arn("444455556666") },
      ],
      noMatch: [{ resources: [arn("999999999999")] }, { resources: [] }],
    },
    {
      // AWS: prefix matching on `resources`, e.g. {"resources":[{"prefix":"arn:aws:ec2:us-east-1:123456789012:"}]}
      name: "prefix on the resources array: any element with the prefix, case-sensitive, strings only",
      pattern: { resources: [{ prefix: "arn:aws:ec2:us-east-1:123456789012:" }] },
      match: [
        { resources: [arn("999999999999"), arn("123456789012")] },
        { resources: "arn:aws:ec2:us-east-1:123456789012:volume/vol-1" },
      ],
      noMatch: [
        { resources: [arn("999999999999")] },
        { resources: ["ARN:AWS:EC2:US-EAST-1:123456789012:instance/i-1"] },
        { resources: [] },
        {},
      ],
    },
    {
      name: "an exact URN or a prefix of it below: what a subscriber by URN prefix uses",
      pattern: {
        resources: [
          "cld:common.Tenant.acme/common.Conversation.c1",
          { prefix: "cld:common.Tenant.acme/common.Conversation.c1/" },
        ],
      },
      match: [
        { resources: ["cld:common.Tenant.acme/common.Conversation.c1"] },
        { resources: ["cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1"] },
      ],
      noMatch: [
        { resources: ["cld:common.Tenant.acme/common.Conversation.c10"] },
        { resources: ["cld:common.Tenant.acme/common.Conversation.c1x/common.Message.m1"] },
        { resources: ["cld:common.Tenant.acme"] },
      ],
    },
    {
      name: "operators apply to each element; nested arrays are flattened",
      pattern: { tags: [{ prefix: "env:" }] },
      match: [{ tags: ["team:a", "env:prod"] }, { tags: [["x"], ["env:dev"]] }],
      noMatch: [{ tags: ["team:a"] }, { tags: [{ name: "env:prod" }] }],
    },
    {
      name: "anything-but over an array matches if any element is not excluded",
      pattern: { state: [{ "anything-but": "initializing" }] },
      match: [{ state: ["initializing", "running"] }],
      noMatch: [{ state: ["initializing"] }, { state: [] }],
    },
    {
      name: "objects inside arrays: one element must match the nested pattern",
      pattern: { employees: { firstName: ["Anna"] } },
      match: [
        {
          employees: [
            { firstName: "John", lastName: "Doe" },
            { firstName: "Anna", lastName: "Smith" },
          ],
        },
        { employees: [[{ firstName: "John" }], [{ firstName: "Anna" }]] },
        { employees: { firstName: "Anna" } },
      ],
      noMatch: [{ employees: [{ firstName: "John" }] }, { employees: [] }, { employees: ["Anna"] }],
    },
    {
      name: "fields of one nested pattern must come from the same array element",
      pattern: { employees: { firstName: ["Anna"], lastName: ["Jones"] } },
      match: [
        {
          employees: [
            { firstName: "Peter", lastName: "Jones" },
            { firstName: "Anna", lastName: "Jones" },
          ],
        },
      ],
      noMatch: [
        {
          employees: [
            { firstName: "Anna", lastName: "Smith" },
            { firstName: "Peter", lastName: "Jones" },
          ],
        },
      ],
    },
    {
      name: "exists false inside an array of objects: absent in some element, or no elements",
      pattern: { tags: { key: [{ exists: false }] } },
      match: [{ tags: [] }, { tags: [{ value: 1 }] }, { tags: [{ key: "a" }, { value: 1 }] }, {}],
      noMatch: [{ tags: [{ key: "a" }] }, { tags: { key: null } }],
    },
    {
      name: "$or inside an array element",
      pattern: { items: { $or: [{ sku: ["A"] }, { qty: [{ numeric: [">", 10] }] }] } },
      match: [
        {
          items: [
            { sku: "B", qty: 1 },
            { sku: "C", qty: 11 },
          ],
        },
      ],
      noMatch: [{ items: [{ sku: "B", qty: 1 }] }],
    },
  ]);
});

describe("null and empty values (eb-event-patterns-null-values)", () => {
  const event = {
    version: "0",
    "detail-type": "EC2 Instance Launch Successful",
    source: "aws.autoscaling",
    resources: [],
    detail: { eventVersion: "", responseElements: null },
  };
  check([
    {
      name: "empty string",
      pattern: { detail: { eventVersion: [""] } },
      match: [event],
      noMatch: [{ detail: { eventVersion: null } }, { detail: {} }],
    },
    {
      name: "null",
      pattern: { detail: { responseElements: [null] } },
      match: [event],
      noMatch: [{ detail: { responseElements: "" } }, { detail: { responseElements: {} } }, { detail: {} }],
    },
  ]);
});

describe("exact values of every JSON type", () => {
  check([
    {
      name: "numbers compare numerically",
      pattern: { n: [300] },
      match: [{ n: 300 }, { n: 300.0 }, { n: 3e2 }],
      noMatch: [{ n: "300" }, { n: 300.1 }],
    },
    {
      name: "large integers such as account numbers",
      pattern: { account: [123456789012] },
      match: [{ account: 123456789012 }],
      noMatch: [{ account: "123456789012" }, { account: 123456789013 }],
    },
    {
      name: "booleans",
      pattern: { flag: [true] },
      match: [{ flag: true }, { flag: [false, true] }],
      noMatch: [{ flag: false }, { flag: "true" }, { flag: 1 }],
    },
    {
      name: "false is not null nor absent",
      pattern: { flag: [false] },
      match: [{ flag: false }],
      noMatch: [{ flag: null }, {}, { flag: 0 }],
    },
    {
      name: "mixed alternatives with exists",
      pattern: { x: ["a", { exists: false }] },
      match: [{ x: "a" }, {}],
      noMatch: [{ x: "b" }],
    },
    {
      name: "keys that are Object.prototype members are not inherited",
      pattern: { constructor: [{ exists: true }], toString: [{ exists: false }] },
      match: [{ constructor: "c" }],
      noMatch: [{}, { constructor: "c", toString: "t" }],
    },
  ]);
});

describe("public API", () => {
  it("validatePattern returns the same pattern, typed", () => {
    const pattern: unknown = { source: ["aws.ec2"] };
    expect(validatePattern(pattern)).toBe(pattern);
  });

  it("compilePattern returns a reusable predicate that ignores later mutation of the pattern", () => {
    const pattern = { source: ["aws.ec2"] as string[] };
    const matches = compilePattern(pattern);
    pattern.source[0] = "aws.s3";
    expect(matches({ source: "aws.ec2" })).toBe(true);
    expect(matches({ source: "aws.s3" })).toBe(false);
  });

  it("compiles once and matches many events quickly", () => {
    const matches = compilePattern({
      source: [{ prefix: "aws." }],
      detail: { state: [{ "anything-but": ["pending", "stopping"] }], n: [{ numeric: [">=", 0] }] },
    });
    const events = Array.from({ length: 20_000 }, (_, i) => ({
      source: i % 2 ? "aws.ec2" : "my.app",
      detail: { state: i % 3 ? "running" : "pending", n: i },
    }));
    const started = performance.now();
    const count = events.filter(matches).length;
    expect(count).toBe(events.filter((e, i) => i % 2 === 1 && e.detail.state === "running").length);
    expect(performance.now() - started).toBeLessThan(500);
  });
});
