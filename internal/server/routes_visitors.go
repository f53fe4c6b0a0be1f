package server

// visitorRoutes registers what an app's page calls for its visitors:
// sign-up, sign-in, sign-out and passkeys (docs/api.md, "Visitors"),
// and the owner's invites.
func (s *Server) visitorRoutes() {
	const v = "/v1/apps/{owner}/{app}/visitors"
	s.api("POST "+v+"/signup", s.signUp)
	s.api("POST "+v+"/signin", s.signIn)
	s.api("POST "+v+"/signout", s.signOut)
	s.api("POST "+v+"/passkeys/register/begin", s.passkeyAddBegin)
	s.api("POST "+v+"/passkeys/register/finish", s.passkeyAddFinish)
	s.api("POST "+v+"/passkeys/signin/begin", s.passkeySignInBegin)
	s.api("POST "+v+"/passkeys/signin/finish", s.passkeySignInFinish)
	s.api("POST /v1/apps/{owner}/{app}/invites", s.invite)
}
