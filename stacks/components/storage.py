"""Shared storage: FSx for Lustre (with its own security group), the checkpoint bucket, and the
SSM transfer bucket.

Lustre traffic is TCP 988 and 1018-1023 (FSx for Lustre user guide, "File system access
control with Amazon VPC"): the file system's group allows those ports from itself and from the
node group, and the node group may reach the file system on them; nothing else. FSx checks
those rules when the file system is created, so it depends on every one of them, not only on
the group id (aws-parallelcluster#6181 "InvalidNetworkSettings ... port 988", fixed by a
DependsOn on the rules in #6342).

The checkpoint bucket is kept by ``pulumi destroy`` (``retain_on_delete``): ``invoke down``
says what it holds and empties it only after a typed confirmation
(``clusterforge.providers.aws.teardown``). The file system and the checkpoint bucket are
``protect``ed: no update replaces or deletes them ("A protected resource cannot be deleted directly,
and any deployment that would delete it (including a replacement) fails", Pulumi docs) unless the
run was told by name (``invoke up --allow-replace NAME``: the driver passes the names in
``clusterforge:allow-replace``; replacing while unprotecting in one update is allowed, pulumi pull
8873). A PERSISTENT file system keeps daily automatic backups and takes a final one when deleted. The transfer bucket carries the Ansible ``aws_ssm``
connection's file copies: unversioned (the plugin's docs warn that a versioned bucket keeps
every payload in its history) and emptied by a one-day lifecycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from components import aws
from components.tags import with_name

LUSTRE_PORTS = ((988, 988), (1018, 1023))
# Transfer payloads are needed for seconds; one day is the shortest S3 lifecycle expiration.
TRANSFER_EXPIRY_DAYS = 1
LUSTRE_VERSION = "2.15"
DRA_FILE_SYSTEM_PATH = "/data"
# HH:MM UTC of the daily automatic FSx backup (outside the weekly maintenance window AWS picks).
BACKUP_START = "03:00"


@dataclass(frozen=True)
class FsxArgs:
    storage_capacity_gib: int
    deployment_type: str
    per_unit_storage_throughput: int | None
    mount_point: str
    import_path: str | None  # s3://... data repository, optional
    automatic_backup_retention_days: int = 7  # PERSISTENT types only; 0: none
    protect: bool = True  # False only for a run told by name to replace it (`invoke up --allow-replace`)


@dataclass(frozen=True)
class BucketArgs:
    name: str | None  # None: derive a unique name from the stack
    noncurrent_version_expiry_days: int
    protect: bool = True


@dataclass(frozen=True)
class StorageArgs:
    stack: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    client_sg_id: pulumi.Input[str]
    fsx: FsxArgs | None
    bucket: BucketArgs | None
    transfer_bucket: bool = False  # connection: ssm needs one for Ansible's file copies
    tags: dict[str, str] = field(default_factory=dict)


class Storage(pulumi.ComponentResource):
    fsx_dns_name: pulumi.Output[str] | None = None
    fsx_mount_name: pulumi.Output[str] | None = None
    fsx_id: pulumi.Output[str] | None = None
    bucket_name: pulumi.Output[str] | None = None
    bucket_arn: pulumi.Output[str] | None = None
    transfer_bucket_name: pulumi.Output[str] | None = None
    transfer_bucket_arn: pulumi.Output[str] | None = None

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterforge:storage:Storage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if args.bucket is not None:
            self._bucket(args, args.bucket, child)
        if args.transfer_bucket:
            self._transfer_bucket(args, child)
        if args.fsx is not None:
            self._lustre(args, args.fsx, child)
        self.register_outputs(
            {
                "fsx_dns_name": self.fsx_dns_name,
                "fsx_mount_name": self.fsx_mount_name,
                "bucket_name": self.bucket_name,
                "transfer_bucket_name": self.transfer_bucket_name,
            }
        )

    def _lustre(self, args: StorageArgs, fsx: FsxArgs, opts: pulumi.ResourceOptions) -> None:
        stack, tags = args.stack, args.tags
        sg = aws.ec2.SecurityGroup(
            f"{stack}-fsx",
            vpc_id=args.vpc_id,
            description="clusterforge FSx for Lustre: LNET from itself and the nodes only",
            tags=with_name(tags, f"{stack}-fsx"),
            opts=opts,
        )
        rules: list[pulumi.Resource] = []
        for low, high in LUSTRE_PORTS:
            ports = f"{low}" if low == high else f"{low}-{high}"
            for peer_label, peer in (("self", sg.id), ("nodes", args.client_sg_id)):
                ingress = aws.vpc.SecurityGroupIngressRule(
                    f"{stack}-fsx-in-{ports}-{peer_label}",
                    security_group_id=sg.id,
                    referenced_security_group_id=peer,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    description=f"Lustre tcp/{ports} from {peer_label}",
                    tags=tags,
                    opts=opts,
                )
                egress = aws.vpc.SecurityGroupEgressRule(
                    f"{stack}-fsx-out-{ports}-{peer_label}",
                    security_group_id=sg.id,
                    referenced_security_group_id=peer,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    description=f"Lustre tcp/{ports} to {peer_label}",
                    tags=tags,
                    opts=opts,
                )
                rules += [ingress, egress]
            # The node side: reach the file system, and accept its replies/callbacks.
            to_fsx = aws.vpc.SecurityGroupEgressRule(
                f"{stack}-nodes-to-fsx-{ports}",
                security_group_id=args.client_sg_id,
                referenced_security_group_id=sg.id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description=f"Lustre tcp/{ports} to FSx",
                tags=tags,
                opts=opts,
            )
            from_fsx = aws.vpc.SecurityGroupIngressRule(
                f"{stack}-nodes-from-fsx-{ports}",
                security_group_id=args.client_sg_id,
                referenced_security_group_id=sg.id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description=f"Lustre tcp/{ports} from FSx",
                tags=tags,
                opts=opts,
            )
            rules += [to_fsx, from_fsx]

        persistent = fsx.deployment_type.startswith("PERSISTENT")
        # PERSISTENT_2 links S3 through a data repository association; older types take import_path.
        use_dra = fsx.import_path is not None and fsx.deployment_type == "PERSISTENT_2"
        backups = persistent and fsx.automatic_backup_retention_days > 0
        fs = aws.fsx.LustreFileSystem(
            f"{stack}-fsx",
            storage_capacity=fsx.storage_capacity_gib,
            deployment_type=fsx.deployment_type,
            per_unit_storage_throughput=fsx.per_unit_storage_throughput if persistent else None,
            subnet_ids=args.subnet_id,
            security_group_ids=[sg.id],
            file_system_type_version=LUSTRE_VERSION,
            data_compression_type="LZ4",
            import_path=None if use_dra else fsx.import_path,
            # FSx for Lustre always encrypts at rest (AWS-managed key unless kms_key_id is set).
            copy_tags_to_backups=persistent or None,
            # Daily backups (none by default on the API) and a final one on delete (pulumi-aws 7.51.1:
            # skip_final_backup "Defaults to `true`"); scratch types have neither.
            automatic_backup_retention_days=fsx.automatic_backup_retention_days if persistent else None,
            daily_automatic_backup_start_time=BACKUP_START if backups else None,
            skip_final_backup=False if persistent else None,
            tags=with_name(tags, f"{stack}-fsx"),
            opts=pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(depends_on=rules, protect=fsx.protect)
            ),
        )
        if use_dra:
            aws.fsx.DataRepositoryAssociation(
                f"{stack}-fsx-dra",
                file_system_id=fs.id,
                data_repository_path=fsx.import_path,
                file_system_path=DRA_FILE_SYSTEM_PATH,
                batch_import_meta_data_on_create=True,
                s3=aws.fsx.DataRepositoryAssociationS3Args(
                    auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(
                        events=["NEW", "CHANGED", "DELETED"]
                    ),
                ),
                tags=with_name(tags, f"{stack}-fsx-dra"),
                opts=opts,
            )
        self.fsx_id = fs.id
        self.fsx_rules = rules
        self.fsx_dns_name = fs.dns_name
        self.fsx_mount_name = fs.mount_name

    def _bucket(self, args: StorageArgs, spec: BucketArgs, opts: pulumi.ResourceOptions) -> None:
        stack, tags = args.stack, args.tags
        name = f"{stack}-checkpoints"
        # Checkpoints outlive `pulumi destroy`; `invoke down` decides (see the module docstring).
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
        bucket_opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=spec.protect))
        bucket = aws.s3.Bucket(
            name,
            bucket=spec.name,
            # Bucket names are global: without a name, let AWS add a unique suffix.
            bucket_prefix=None if spec.name else f"clusterforge-{stack}-ckpt-"[:37],
            force_destroy=False,
            tags=with_name(tags, name),
            opts=bucket_opts,
        )
        aws.s3.BucketPublicAccessBlock(
            name,
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=opts,
        )
        aws.s3.BucketOwnershipControls(
            name,
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),  # no ACLs
            opts=opts,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            name,
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms"
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=opts,
        )
        aws.s3.BucketVersioning(
            name,
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=opts,
        )
        aws.s3.BucketLifecycleConfiguration(
            name,
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-noncurrent-checkpoints",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=spec.noncurrent_version_expiry_days
                    ),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=7
                    ),
                )
            ],
            opts=opts,
        )
        self.bucket_name = bucket.bucket
        self.bucket_arn = bucket.arn

    def _transfer_bucket(self, args: StorageArgs, opts: pulumi.ResourceOptions) -> None:
        stack, tags = args.stack, args.tags
        name = f"{stack}-ssm-transfer"
        bucket = aws.s3.Bucket(
            name,
            bucket_prefix=f"clusterforge-{stack}-ssm-"[:37],
            force_destroy=True,  # only transient copies live here
            tags=with_name(tags, name),
            opts=opts,
        )
        aws.s3.BucketPublicAccessBlock(
            name,
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=opts,
        )
        aws.s3.BucketOwnershipControls(
            name,
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=opts,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            name,
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms"
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=opts,
        )
        # No BucketVersioning resource: a new bucket is unversioned, and must stay so.
        aws.s3.BucketLifecycleConfiguration(
            name,
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-transfers",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(
                        days=TRANSFER_EXPIRY_DAYS
                    ),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=TRANSFER_EXPIRY_DAYS
                    ),
                )
            ],
            opts=opts,
        )
        self.transfer_bucket_name = bucket.bucket
        self.transfer_bucket_arn = bucket.arn
