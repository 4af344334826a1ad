package servicerole

// Reasons of the binding roles' wildcards.
const (
	reasonRoles = "Binding templates of role plans make one IAM role per binding under the path /serverless-osb/ " +
		"(services/*/binding-role.yaml), named by CloudFormation after the binding's stack (PREFIX-…): this " +
		"pattern is those roles and no other IAM identity. Managed policies are not granted; a role comes into being, and " +
		"gets a policy, only under the boundary."
	reasonProfiles = "IAM Roles Anywhere names a profile by an id it makes up (profile/<uuid>), which CloudFormation " +
		"only learns once the profile exists; CreateProfile supports no resource-level permission. Every other action is " +
		"allowed only on profiles carrying CloudFormation's tag aws:cloudformation:stack-name = PREFIX-…, that is, the " +
		"broker's stacks' profiles (the type takes CloudFormation's system tags), and tagging a new one only with that tag " +
		"in the request; a profile may name only the binding roles (iam:PassRole)."
)

// roleGrants are the service role's statements for role plans' bindings
// (binding_credentials: role): an IAM role on the boundary that the bound
// app's instance identity certificates alone can assume, and the IAM Roles
// Anywhere profile that names it.
func roleGrants(prefix string, boundary any) []Statement {
	roles := ARN{Service: "iam", Resource: "role" + UserPath + prefix + "-*", Regionless: true}
	profiles := ARN{Service: "rolesanywhere", Resource: "profile/*"}
	withBoundary := map[string]any{"StringEquals": map[string]any{"iam:PermissionsBoundary": boundary}}
	ownStack := prefix + "-*"
	role, profile := []string{"AWS::IAM::Role"}, []string{"AWS::RolesAnywhere::Profile"}
	return []Statement{
		{
			// What needs no boundary condition: reading, tagging, the trust
			// policy and description, and taking permissions away.
			Sid: "BindingRoles",
			Actions: []string{
				"iam:DeleteRole", "iam:GetRole", "iam:UpdateRole", "iam:UpdateRoleDescription", "iam:UpdateAssumeRolePolicy",
				"iam:TagRole", "iam:UntagRole", "iam:GetRolePolicy", "iam:DeleteRolePolicy", "iam:ListRolePolicies",
				"iam:ListAttachedRolePolicies",
			},
			Resources: []ARN{roles},
			Reason:    reasonRoles,
			// The profile's handlers read the roles they name.
			For: append(role, profile...),
		},
		{
			// A role comes into being, and gets a policy, only under the
			// boundary: whatever its policy says, it may do no more.
			Sid:        "BoundedBindingRoles",
			Actions:    []string{"iam:CreateRole", "iam:PutRolePolicy", "iam:PutRolePermissionsBoundary"},
			Resources:  []ARN{roles},
			Conditions: withBoundary,
			Reason:     reasonRoles,
			For:        role,
		},
		{
			// A profile names the binding roles, which Roles Anywhere then
			// assumes: they are the only roles passed to it.
			Sid:       "PassBindingRolesToRolesAnywhere",
			Actions:   []string{"iam:PassRole"},
			Resources: []ARN{roles},
			Conditions: map[string]any{
				"StringEquals": map[string]any{"iam:PassedToService": "rolesanywhere.amazonaws.com"},
			},
			Reason: reasonRoles,
			For:    profile,
		},
		{
			// CreateProfile has no resource to name: the stack's name in
			// the tags of the request is what says the profile is the
			// broker's.
			Sid:        "CreateBindingProfiles",
			Actions:    []string{"rolesanywhere:CreateProfile"},
			Everywhere: true,
			Conditions: map[string]any{
				"StringLike": map[string]any{"aws:RequestTag/aws:cloudformation:stack-name": ownStack},
			},
			Reason: reasonProfiles,
			For:    profile,
		},
		{
			// Tags given when the profile is created (the stack's tags,
			// CloudFormation's system tags among them).
			Sid:       "TagNewBindingProfiles",
			Actions:   []string{"rolesanywhere:TagResource"},
			Resources: []ARN{profiles},
			Conditions: map[string]any{
				"StringLike": map[string]any{"aws:RequestTag/aws:cloudformation:stack-name": ownStack},
			},
			Reason: reasonProfiles,
			For:    profile,
		},
		{
			Sid: "ManageStackBindingProfiles",
			Actions: []string{
				"rolesanywhere:GetProfile", "rolesanywhere:UpdateProfile", "rolesanywhere:EnableProfile",
				"rolesanywhere:DisableProfile", "rolesanywhere:DeleteProfile",
				"rolesanywhere:PutAttributeMapping", "rolesanywhere:DeleteAttributeMapping",
				"rolesanywhere:TagResource", "rolesanywhere:UntagResource", "rolesanywhere:ListTagsForResource",
			},
			Resources: []ARN{profiles},
			Conditions: map[string]any{
				"StringLike": map[string]any{"aws:ResourceTag/aws:cloudformation:stack-name": ownStack},
			},
			Reason: reasonProfiles,
			For:    profile,
		},
	}
}

// rolesUnused are the actions the binding roles' and profiles' handlers
// need only for properties no example template sets.
var rolesUnused = join(
	unused("AWS::IAM::Role", "managed policies", []string{"ManagedPolicyArns"},
		"iam:AttachRolePolicy", "iam:DetachRolePolicy"),
	unused("AWS::RolesAnywhere::Profile", "managed policies as session policies", []string{"ManagedPolicyArns"},
		"iam:GetPolicy"),
)
