/** The least an aws-mode configuration needs (Cedar, so no policies bucket): add the setting under test. */
export const AWS_ENV = {
  ARBOR_MODE: "aws",
  AWS_REGION: "eu-west-1",
  ARBOR_RESOURCES_BUCKET: "b",
  ARBOR_TABLE_NAME: "t",
  ARBOR_EVENT_BUS_NAME: "e",
  ARBOR_POLICY_ENGINE: "cedar",
} as const;
