package appcode

// Code file names inside a deployed folder.
const (
	AccessFile  = "access.js"
	BackendFile = "backend.js"
)

// StaticDir is the folder of static files inside an app's folder.
const StaticDir = "public"
